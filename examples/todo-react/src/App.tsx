import { useState } from "react";
import { z } from "zod";
import {
  ApprovalDialog,
  ChatPanel,
  RuntimeErrors,
  TetherProvider,
  ToolInspector,
  useAgentContext,
  useAgentTool,
} from "@tether/react";
import "@tether/react/styles.css";

function Todos() {
  const [todos, setTodos] = useState<string[]>([]);
  // The agent reads the list as it is now (as data, before each message): "what is on my list?"
  // needs no tool.
  useAgentContext({ description: "The to-do list", value: todos });
  // The agent may call todo_add while <Todos/> is mounted; the handler sees the current state.
  useAgentTool(
    { name: "todo_add", description: "Add an item to the to-do list.", schema: z.object({ title: z.string().min(1) }) },
    ({ title }) => {
      setTodos((list) => [...list, title]);
      return { added: title };
    },
  );
  // Risk "high": the user approves each call first. The enum lists the items there are now,
  // so the model can only name one of them.
  useAgentTool(
    {
      name: "todo_remove",
      description: "Remove an item from the to-do list.",
      schema: z.object({ title: z.enum(todos) }),
      risk: "high",
    },
    ({ title }) => {
      setTodos((list) => list.filter((item) => item !== title));
      return { removed: title };
    },
  );
  return (
    <ul>
      {todos.map((item) => (
        <li key={item} data-testid="todo">
          {item}
        </li>
      ))}
    </ul>
  );
}

export default function App() {
  // No url: the agent server is at /ws on this page's origin (`tether serve --static`, or the
  // dev server's proxy in vite.config.ts).
  return (
    <TetherProvider>
      <h1>To-do</h1>
      <Todos />
      <ChatPanel />
      <ApprovalDialog />
      <ToolInspector />
      <RuntimeErrors />
    </TetherProvider>
  );
}
