/** A JSON Schema object (draft 2020-12) describing a tool's arguments. */
export type JsonSchema = Record<string, unknown>;

/**
 * A schema library object in the Standard Schema shape (zod 4, valibot, arktype…). Only its
 * types are read here; the JSON Schema comes from the library's own converter.
 */
export interface StandardSchemaLike<Output = unknown> {
  readonly "~standard": {
    readonly vendor: string;
    readonly types?: { readonly input: unknown; readonly output: Output } | undefined;
    readonly jsonSchema?: { readonly input: (options: { target: string }) => JsonSchema } | undefined;
  };
}

/** What `schema` accepts: a zod 4 schema (or any Standard JSON Schema object) or plain JSON Schema. */
export type ToolSchema = StandardSchemaLike | JsonSchema;

/** The arguments of a tool without a schema: an empty object. */
export type NoArgs = Record<string, never>;

/**
 * The arguments a handler gets for `schema`: the schema's output type; an empty object without a
 * schema; `any` for a plain JSON Schema object (describe it with zod to have it typed).
 */
export type ArgsOf<S> = 0 extends 1 & S
  ? any // eslint-disable-line @typescript-eslint/no-explicit-any
  : [S] extends [undefined]
  ? NoArgs
  : S extends StandardSchemaLike<infer Output>
    ? Output
    : any; // eslint-disable-line @typescript-eslint/no-explicit-any

type ZodLike = { toJSONSchema: (params: { target: string; io: "input" }) => JsonSchema };

const cache = new WeakMap<object, JsonSchema>();

const isStandard = (schema: object): schema is StandardSchemaLike => "~standard" in schema;

/**
 * The JSON Schema (2020-12) of `schema`. A zod 4 schema is converted with zod's own
 * `z.toJSONSchema` (`schema.toJSONSchema({ target: "draft-2020-12", io: "input" })`: the
 * arguments the model may send, so fields with defaults are optional); another Standard Schema
 * library through `~standard.jsonSchema`. Plain objects are used as they are. Memoised per object.
 */
export function toJsonSchema(schema: ToolSchema | undefined): JsonSchema {
  if (!schema) return { type: "object" };
  let json = cache.get(schema);
  if (json) return json;
  if (isStandard(schema)) {
    const target = "draft-2020-12";
    const zod = schema as unknown as Partial<ZodLike>;
    if (typeof zod.toJSONSchema === "function") {
      json = zod.toJSONSchema({ target, io: "input" });
    } else if (schema["~standard"].jsonSchema) {
      json = schema["~standard"].jsonSchema.input({ target });
    } else {
      throw new TypeError(
        `@tether/react: a ${schema["~standard"].vendor} schema without a JSON Schema converter; pass a JSON Schema object`,
      );
    }
  } else {
    json = schema;
  }
  cache.set(schema, json);
  return json;
}
