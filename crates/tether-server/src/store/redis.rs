//! The Redis store (`--store redis://HOST:PORT/DB`): sessions shared by several servers.
//!
//! Keys, namespaced by a prefix (`tether` by default) and hash-tagged by session so that one
//! session's keys live in one Redis Cluster slot:
//! - `PREFIX:{ID}:s`, a hash: the token hash (`t`), the state (`s`), the expiry (`e`, ms);
//! - `PREFIX:{ID}:log`, a stream: the replay log, entry id `SEQ-0`, field `f` the frame's text,
//!   trimmed with `XTRIM MINID`;
//! - `PREFIX:sessions`, a sorted set of session ids by expiry: the index `count` and `expire` use.
//!
//! A write is one Lua script (atomic, and all its keys in one slot), so a reader never sees half
//! of it; both session keys carry the session's expiry (`PEXPIREAT`), so Redis itself forgets an
//! expired session. Redis 7 or later (the script declares its flags, so Redis refuses it whole
//! when it is out of memory, instead of running it halfway). The connection is a
//! `ConnectionManager`: it reconnects by itself; a call made while Redis is away fails with
//! [`StoreProblem::Unavailable`] within the response timeout.

use std::future::Future;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use super::{SessionStore, SessionWrite, StoreFuture, StoredSession};
use crate::ServerError;
use crate::error::StoreProblem;

/// How long one Redis call may take before it fails as unavailable.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(2);

const WRITE_SCRIPT: &str = r"#!lua
-- KEYS: the session hash, its log stream, the expiry index.
-- ARGV: session id, token hash ('' keeps it), '1' when a state follows, the state, expiry (ms),
-- trim below ('' for none), then frame number and text pairs.
local state, log, index = KEYS[1], KEYS[2], KEYS[3]
if ARGV[2] ~= '' then redis.call('HSET', state, 't', ARGV[2]) end
if ARGV[3] == '1' then redis.call('HSET', state, 's', ARGV[4]) end
redis.call('HSETNX', state, 't', '')
redis.call('HSETNX', state, 's', '')
redis.call('HSET', state, 'e', ARGV[5])
local last = 0
local top = redis.call('XREVRANGE', log, '+', '-', 'COUNT', 1)
if #top > 0 then last = tonumber(string.match(top[1][1], '^(%d+)')) end
for i = 7, #ARGV, 2 do
  local seq = tonumber(ARGV[i])
  if seq > last then
    redis.call('XADD', log, ARGV[i] .. '-0', 'f', ARGV[i + 1])
    last = seq
  end
end
if ARGV[6] ~= '' then redis.call('XTRIM', log, 'MINID', ARGV[6] .. '-0') end
redis.call('PEXPIREAT', state, ARGV[5])
if redis.call('EXISTS', log) == 1 then redis.call('PEXPIREAT', log, ARGV[5]) end
return 1
";

/// Sessions in Redis.
#[derive(Clone)]
pub struct RedisStore {
    url: String,
    prefix: String,
    connection: ConnectionManager,
    write: redis::Script,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore").field("url", &self.url).field("prefix", &self.prefix).finish_non_exhaustive()
    }
}

/// Turns a Redis error into the server's error, saying what happened.
fn classify(url: &str, error: &redis::RedisError) -> ServerError {
    let text = error.to_string();
    let problem = if text.contains("OOM") { StoreProblem::Full } else { StoreProblem::Unavailable };
    let advice = match problem {
        StoreProblem::Full => "Redis is out of memory (maxmemory); nothing was written",
        _ => "Redis cannot be reached or failed",
    };
    ServerError::Store { store: url.to_string(), problem, message: format!("{advice} ({text})") }
}

impl RedisStore {
    /// Connects to the Redis at `url` (`redis://HOST:PORT/DB`), keys namespaced by `prefix`.
    /// Fails at once, clearly, when Redis cannot be reached.
    pub async fn connect(url: &str, prefix: &str) -> Result<RedisStore, ServerError> {
        let fail = |error: redis::RedisError| classify(url, &error);
        let client = redis::Client::open(url).map_err(|error| ServerError::Store {
            store: url.to_string(),
            problem: StoreProblem::Unavailable,
            message: format!("not a Redis URL (expected redis://HOST:PORT/DB): {error}"),
        })?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(RESPONSE_TIMEOUT))
            .set_response_timeout(Some(RESPONSE_TIMEOUT))
            .set_number_of_retries(2)
            .set_max_delay(Duration::from_millis(500));
        let mut connection = client.get_connection_manager_with_config(config).await.map_err(fail)?;
        let _: String = redis::cmd("PING").query_async(&mut connection).await.map_err(fail)?;
        Ok(RedisStore {
            url: url.to_string(),
            prefix: prefix.to_string(),
            connection,
            write: redis::Script::new(WRITE_SCRIPT),
        })
    }

    fn keys(&self, id: &str) -> (String, String) {
        (format!("{}:{{{id}}}:s", self.prefix), format!("{}:{{{id}}}:log", self.prefix))
    }

    fn index(&self) -> String {
        format!("{}:sessions", self.prefix)
    }

    fn error(&self, error: &redis::RedisError) -> ServerError {
        classify(&self.url, error)
    }

    /// Runs `call` on the connection, once more if the connection had dropped (Redis restarted,
    /// a failover): the manager reconnects meanwhile. Every call of this store may be repeated
    /// (a write skips frames it already stored), so a retry never applies anything twice.
    async fn with_retry<T, F, Fut>(&self, call: F) -> Result<T, ServerError>
    where
        F: Fn(ConnectionManager) -> Fut,
        Fut: Future<Output = redis::RedisResult<T>>,
    {
        match call(self.connection.clone()).await {
            Err(error) if error.is_io_error() || error.is_connection_dropped() || error.is_connection_refusal() => {
                call(self.connection.clone()).await.map_err(|e| self.error(&e))
            }
            other => other.map_err(|e| self.error(&e)),
        }
    }
}

impl SessionStore for RedisStore {
    fn describe(&self) -> String {
        self.url.clone()
    }

    fn load<'a>(&'a self, id: &'a str, now_ms: u64) -> StoreFuture<'a, Result<Option<StoredSession>, ServerError>> {
        Box::pin(async move {
            let (state_key, log_key) = self.keys(id);
            let (fields, entries): (Vec<(String, Vec<u8>)>, redis::streams::StreamRangeReply) = self
                .with_retry(|mut connection| {
                    let (state_key, log_key) = (state_key.clone(), log_key.clone());
                    async move {
                        redis::pipe()
                            .cmd("HGETALL")
                            .arg(state_key)
                            .cmd("XRANGE")
                            .arg(log_key)
                            .arg("-")
                            .arg("+")
                            .query_async(&mut connection)
                            .await
                    }
                })
                .await?;
            let field = |name: &str| fields.iter().find(|(key, _)| key == name).map(|(_, value)| value.as_slice());
            let Some(expiry) = field("e") else { return Ok(None) };
            let expires_at_ms: u64 = std::str::from_utf8(expiry).ok().and_then(|e| e.parse().ok()).unwrap_or(0);
            if expires_at_ms < now_ms {
                return Ok(None);
            }
            let mut token_hash = [0u8; 32];
            if let Some(hash) = field("t").filter(|h| h.len() == 32) {
                token_hash.copy_from_slice(hash);
            }
            let state = String::from_utf8_lossy(field("s").unwrap_or_default()).into_owned();
            let mut log = Vec::with_capacity(entries.ids.len());
            for entry in entries.ids {
                let seq = entry.id.split('-').next().and_then(|n| n.parse().ok()).unwrap_or(0);
                let text: Option<String> = entry.get("f");
                log.push((seq, text.unwrap_or_default()));
            }
            Ok(Some(StoredSession { id: id.to_string(), token_hash, state, log, expires_at_ms }))
        })
    }

    fn write<'a>(&'a self, id: &'a str, write: SessionWrite) -> StoreFuture<'a, Result<(), ServerError>> {
        Box::pin(async move {
            let (state_key, log_key) = self.keys(id);
            let mut invocation = self.write.prepare_invoke();
            invocation.key(&state_key).key(&log_key).key(self.index());
            invocation
                .arg(id)
                .arg(write.token_hash.map(Vec::from).unwrap_or_default())
                .arg(if write.state.is_some() { "1" } else { "0" })
                .arg(write.state.unwrap_or_default())
                .arg(write.expires_at_ms)
                .arg(write.trim_below.map(|n| n.to_string()).unwrap_or_default());
            for (seq, text) in write.append {
                invocation.arg(seq).arg(text);
            }
            let invocation = &invocation;
            self.with_retry(|mut connection| async move { invocation.invoke_async::<i64>(&mut connection).await })
                .await?;
            // The index only serves `count` and `expire`: outside the script, since in a Redis
            // Cluster it lives in another slot than the session's keys.
            let index = self.index();
            let expires_at_ms = write.expires_at_ms;
            self.with_retry(|mut connection| {
                let index = index.clone();
                async move {
                    redis::cmd("ZADD").arg(index).arg(expires_at_ms).arg(id).query_async::<i64>(&mut connection).await
                }
            })
            .await?;
            Ok(())
        })
    }

    fn remove<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Result<(), ServerError>> {
        Box::pin(async move {
            let (state_key, log_key) = self.keys(id);
            let index = self.index();
            self.with_retry(|mut connection| {
                let (state_key, log_key, index) = (state_key.clone(), log_key.clone(), index.clone());
                async move {
                    redis::pipe()
                        .cmd("DEL")
                        .arg(state_key)
                        .arg(log_key)
                        .ignore()
                        .cmd("ZREM")
                        .arg(index)
                        .arg(id)
                        .ignore()
                        .query_async::<()>(&mut connection)
                        .await
                }
            })
            .await
        })
    }

    fn expire(&self, now_ms: u64) -> StoreFuture<'_, Result<usize, ServerError>> {
        Box::pin(async move {
            // Redis has already dropped the expired sessions' keys; this trims the index.
            let index = self.index();
            self.with_retry(|mut connection| {
                let index = index.clone();
                async move {
                    redis::cmd("ZREMRANGEBYSCORE")
                        .arg(index)
                        .arg("-inf")
                        .arg(format!("({now_ms}"))
                        .query_async::<usize>(&mut connection)
                        .await
                }
            })
            .await
        })
    }

    fn count(&self) -> StoreFuture<'_, Result<usize, ServerError>> {
        Box::pin(async move {
            let index = self.index();
            self.with_retry(|mut connection| {
                let index = index.clone();
                async move { redis::cmd("ZCARD").arg(index).query_async::<usize>(&mut connection).await }
            })
            .await
        })
    }
}
