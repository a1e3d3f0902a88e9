//! The Redis store (`--store redis://HOST:PORT/DB`): sessions shared by several servers, on one
//! Redis or on a Redis Cluster.
//!
//! A Redis Cluster is recognised when connecting (`INFO cluster`); several seed nodes may be
//! given, separated by commas (`redis://10.0.0.1:6379,redis://10.0.0.2:6379`), and any one that
//! answers is enough. Every command and script touches keys of one slot only, so nothing here
//! is a cross-slot operation.
//!
//! Keys, namespaced by a prefix (`tether` by default) and hash-tagged by session so that one
//! session's keys live in one Redis Cluster slot:
//! - `PREFIX:{ID}:s`, a hash: the token hash (`t`), the state (`s`), the expiry (`e`, ms), the
//!   current claim (`o`, `INSTANCE/N`) and the claim counter (`n`);
//! - `PREFIX:{ID}:log`, a stream: the replay log, entry id `SEQ-0`, field `f` the frame's text,
//!   trimmed with `XTRIM MINID`;
//! - `PREFIX:{ID}:p`, a stream: the patches to the state since it was last written whole, entry
//!   id `N-0`, field `f` the patch's text, deleted when a whole state is written;
//! - `PREFIX:sessions`, a sorted set of session ids by expiry: the index `count` and `expire` use
//!   (one key, so in a cluster one slot: it is updated after each write, outside the script);
//! - `PREFIX:instance:INSTANCE`, a server's heartbeat, expiring unless renewed; and the pub/sub
//!   channel `PREFIX:release:INSTANCE`, where other servers ask it to let a session go (in a
//!   cluster, a message published on any node reaches subscribers on every node).
//!
//! A session's claim is fenced: the write script refuses a write whose claim is not the
//! session's current one, so a server that lost a session (another claimed it after its
//! heartbeat lapsed) can no longer change it.
//!
//! A write is one Lua script (atomic, and all its keys in one slot), so a reader never sees half
//! of it; both session keys carry the session's expiry (`PEXPIREAT`), so Redis itself forgets an
//! expired session. Redis 7 or later (the script declares its flags, so Redis refuses it whole
//! when it is out of memory, instead of running it halfway). The connection is a
//! `ConnectionManager` (on a cluster, the cluster client, which follows the slots as they move
//! and fail over): it reconnects by itself; a call made while Redis is away fails with
//! [`StoreProblem::Unavailable`] within the response timeout.
//!
//! Redis replicates asynchronously: a write its master acknowledged may be missing on the
//! replica that replaces it when the master dies. With [`RedisStore::wait_replicas`] (`tether
//! serve --redis-wait-replicas N`) a write counts as stored only once `N` replicas have it
//! (`WAIT`, sent with the write on the same connection); until then it fails as unavailable, and
//! the server tries it again before the frames that depend on it leave. docs/scaling.md says
//! what each setting covers.

use std::future::Future;
use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster_async::ClusterConnection;

use super::{Claim, SessionStore, SessionWrite, StoreFuture, StoredSession};
use crate::ServerError;
use crate::error::StoreProblem;

/// How long one Redis call may take before it fails as unavailable.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(2);

/// How long a write waits for its replicas (`WAIT`): well within [`RESPONSE_TIMEOUT`].
const WAIT_TIMEOUT: Duration = Duration::from_millis(1000);

const WRITE_SCRIPT: &str = r"#!lua
-- KEYS: the session hash, its log stream, its patch stream (all in the session's slot).
-- ARGV: session id, token hash ('' keeps it), '1' when a state follows, the state, expiry (ms),
-- trim below ('' for none), the writer's claim ('' for none), the number of frames, then frame
-- number and text pairs, then patch number and text pairs.
-- Returns 0, writing nothing, when the claim is not the session's current one.
local state, log, patches = KEYS[1], KEYS[2], KEYS[3]
if ARGV[7] ~= '' and (redis.call('HGET', state, 'o') or '') ~= ARGV[7] then return 0 end
if ARGV[2] ~= '' then redis.call('HSET', state, 't', ARGV[2]) end
if ARGV[3] == '1' then
  redis.call('HSET', state, 's', ARGV[4])
  redis.call('DEL', patches)
end
redis.call('HSETNX', state, 't', '')
redis.call('HSETNX', state, 's', '')
redis.call('HSET', state, 'e', ARGV[5])
-- Numbers only grow: what is not above the last stored number was stored before.
local function append(stream, first, last_arg)
  local last = 0
  local top = redis.call('XREVRANGE', stream, '+', '-', 'COUNT', 1)
  if #top > 0 then last = tonumber(string.match(top[1][1], '^(%d+)')) end
  for i = first, last_arg, 2 do
    local n = tonumber(ARGV[i])
    if n > last then
      redis.call('XADD', stream, ARGV[i] .. '-0', 'f', ARGV[i + 1])
      last = n
    end
  end
end
local frames_end = 8 + 2 * tonumber(ARGV[8])
append(log, 9, frames_end)
append(patches, frames_end + 1, #ARGV)
if ARGV[6] ~= '' then redis.call('XTRIM', log, 'MINID', ARGV[6] .. '-0') end
redis.call('PEXPIREAT', state, ARGV[5])
if redis.call('EXISTS', log) == 1 then redis.call('PEXPIREAT', log, ARGV[5]) end
if redis.call('EXISTS', patches) == 1 then redis.call('PEXPIREAT', patches, ARGV[5]) end
return 1
";

const LOAD_SCRIPT: &str = r"#!lua flags=no-writes
-- KEYS: the session hash, its log stream, its patch stream. Returns all three, read at once.
return {redis.call('HGETALL', KEYS[1]), redis.call('XRANGE', KEYS[2], '-', '+'), redis.call('XRANGE', KEYS[3], '-', '+')}
";

const CLAIM_SCRIPT: &str = r"#!lua
-- KEYS: the session hash. ARGV: the claim seen (''), the instance, the expiry (ms) of a session
-- never written. Returns the new claim, or false when the claim changed meanwhile.
local state = KEYS[1]
if (redis.call('HGET', state, 'o') or '') ~= ARGV[1] then return false end
local claim = ARGV[2] .. '/' .. redis.call('HINCRBY', state, 'n', 1)
redis.call('HSET', state, 'o', claim)
if redis.call('PTTL', state) < 0 then redis.call('PEXPIREAT', state, ARGV[3]) end
return claim
";

const RELEASE_SCRIPT: &str = r"#!lua
-- KEYS: the session hash. ARGV: the claim to give up, or '' and the instance whose claim it is.
local state = KEYS[1]
local claim = redis.call('HGET', state, 'o')
if not claim or claim == '' then return 0 end
if (ARGV[1] ~= '' and claim == ARGV[1]) or (ARGV[1] == '' and string.sub(claim, 1, #ARGV[2] + 1) == ARGV[2] .. '/') then
  redis.call('HSET', state, 'o', '')
  return 1
end
return 0
";

/// A connection to one Redis or to a Redis Cluster.
#[derive(Clone)]
enum Link {
    One(ConnectionManager),
    Cluster(ClusterConnection),
}

impl ConnectionLike for Link {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a redis::Cmd) -> redis::RedisFuture<'a, redis::Value> {
        match self {
            Link::One(connection) => connection.req_packed_command(cmd),
            Link::Cluster(connection) => connection.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> redis::RedisFuture<'a, Vec<redis::Value>> {
        match self {
            Link::One(connection) => connection.req_packed_commands(pipeline, offset, count),
            Link::Cluster(connection) => connection.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Link::One(connection) => connection.get_db(),
            Link::Cluster(connection) => connection.get_db(),
        }
    }
}

/// Sessions in Redis.
#[derive(Clone)]
pub struct RedisStore {
    url: String,
    prefix: String,
    connection: Link,
    /// A connection of their own for the write scripts: a write that waits for its replicas
    /// (`WAIT` holds the connection it is sent on) never holds up loads, claims and heartbeats.
    writes: Link,
    /// The seed nodes' clients, in the order given: the pub/sub connection goes to the first
    /// that answers.
    seeds: Vec<redis::Client>,
    /// Replicas that must have a write before it counts as stored (`WAIT`).
    wait_replicas: u32,
    write: redis::Script,
    load: redis::Script,
    claim: redis::Script,
    release: redis::Script,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore")
            .field("url", &self.url)
            .field("prefix", &self.prefix)
            .field("cluster", &matches!(self.connection, Link::Cluster(_)))
            .field("wait_replicas", &self.wait_replicas)
            .finish_non_exhaustive()
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
    /// Connects to the Redis at `url` (`redis://HOST:PORT/DB`), keys namespaced by `prefix`. A
    /// Redis Cluster is recognised by itself; `url` may then name several seed nodes, separated
    /// by commas (database 0 only, as a cluster has no other). Fails at once, clearly, when no
    /// seed can be reached or the URL is not one.
    pub async fn connect(url: &str, prefix: &str) -> Result<RedisStore, ServerError> {
        let fail = |error: redis::RedisError| classify(url, &error);
        let config_error = |message: String| ServerError::Store {
            store: url.to_string(),
            problem: StoreProblem::Unavailable,
            message,
        };
        let other_database = |seed: &redis::Client| {
            let info = seed.get_connection_info();
            config_error(format!(
                "a Redis Cluster has only database 0; {} names database {}",
                info.addr(),
                info.redis_settings().db()
            ))
        };
        let seeds = url
            .split(',')
            .map(|seed| {
                redis::Client::open(seed.trim()).map_err(|error| {
                    config_error(format!("{seed:?} is not a Redis URL (expected redis://HOST:PORT/DB): {error}"))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(RESPONSE_TIMEOUT))
            .set_response_timeout(Some(RESPONSE_TIMEOUT))
            .set_number_of_retries(2)
            .set_max_delay(Duration::from_millis(500));
        // The first seed that answers says whether this is a cluster.
        let mut first = None;
        let mut last_error = None;
        for seed in &seeds {
            match seed.get_connection_manager_with_config(config.clone()).await {
                Ok(mut connection) => {
                    match redis::cmd("INFO").arg("cluster").query_async::<String>(&mut connection).await {
                        Ok(info) => {
                            first = Some((connection, info.contains("cluster_enabled:1")));
                            break;
                        }
                        Err(error) => last_error = Some(error),
                    }
                }
                Err(error) if error.to_string().contains("SELECT is not allowed in cluster mode") => {
                    return Err(other_database(seed));
                }
                Err(error) => last_error = Some(error),
            }
        }
        let Some((single, cluster)) = first else {
            return Err(fail(last_error.expect("at least one seed was tried")));
        };
        let (connection, writes) = if cluster {
            if let Some(seed) = seeds.iter().find(|seed| seed.get_connection_info().redis_settings().db() != 0) {
                return Err(other_database(seed));
            }
            let client =
                redis::cluster::ClusterClientBuilder::new(seeds.iter().map(|seed| seed.get_connection_info().clone()))
                    .connection_timeout(RESPONSE_TIMEOUT)
                    .response_timeout(RESPONSE_TIMEOUT)
                    .build()
                    .map_err(fail)?;
            let mut connection = client.get_async_connection().await.map_err(fail)?;
            let _: String = redis::cmd("PING").query_async(&mut connection).await.map_err(fail)?;
            let writes = client.get_async_connection().await.map_err(fail)?;
            (Link::Cluster(connection), Link::Cluster(writes))
        } else {
            if seeds.len() > 1 {
                return Err(config_error(
                    "several Redis URLs name the seeds of a Redis Cluster, but this Redis is not one".into(),
                ));
            }
            let writes = seeds[0].get_connection_manager_with_config(config).await.map_err(fail)?;
            (Link::One(single), Link::One(writes))
        };
        Ok(RedisStore {
            url: url.to_string(),
            prefix: prefix.to_string(),
            connection,
            writes,
            seeds,
            wait_replicas: 0,
            write: redis::Script::new(WRITE_SCRIPT),
            load: redis::Script::new(LOAD_SCRIPT),
            claim: redis::Script::new(CLAIM_SCRIPT),
            release: redis::Script::new(RELEASE_SCRIPT),
        })
    }

    /// From now on a write counts as stored only once `replicas` replicas of its Redis have it
    /// (`WAIT`, within the response timeout; until then it fails as unavailable and the server
    /// tries it again). `0`, the default: once the master has it.
    pub fn wait_replicas(mut self, replicas: u32) -> RedisStore {
        self.wait_replicas = replicas;
        self
    }

    /// Whether this store is on a Redis Cluster.
    pub fn is_cluster(&self) -> bool {
        matches!(self.connection, Link::Cluster(_))
    }

    /// Session `id`'s keys, all in its slot: its hash, its log stream, its patch stream.
    fn keys(&self, id: &str) -> (String, String, String) {
        let key = |name: &str| format!("{}:{{{id}}}:{name}", self.prefix);
        (key("s"), key("log"), key("p"))
    }

    fn heartbeat_key(&self, instance: &str) -> String {
        format!("{}:instance:{instance}", self.prefix)
    }

    fn release_channel(&self, instance: &str) -> String {
        format!("{}:release:{instance}", self.prefix)
    }

    /// The session's current claim (`""` when none).
    async fn current_claim(&self, state_key: &str) -> Result<String, ServerError> {
        self.with_retry(|mut connection| async move {
            redis::cmd("HGET").arg(state_key).arg("o").query_async::<Option<String>>(&mut connection).await
        })
        .await
        .map(Option::unwrap_or_default)
    }

    fn index(&self) -> String {
        format!("{}:sessions", self.prefix)
    }

    fn error(&self, error: &redis::RedisError) -> ServerError {
        classify(&self.url, error)
    }

    /// Runs the write script (`eval`, an `EVALSHA` of it) and, when replicas must confirm, `WAIT`
    /// right after it on the same connection (a pipeline goes to the slot's master whole), so
    /// that it waits for this write. Loads the script first where Redis does not have it (a
    /// restarted Redis, a replica promoted). Returns the script's answer and the replicas that
    /// confirmed (the number asked for when none is).
    async fn write_and_wait(&self, mut link: Link, eval: &redis::Cmd) -> redis::RedisResult<(i64, u32)> {
        let mut pipeline = redis::pipe();
        pipeline.add_command(eval.clone());
        if self.wait_replicas > 0 {
            pipeline.cmd("WAIT").arg(self.wait_replicas).arg(WAIT_TIMEOUT.as_millis() as u64);
        }
        let replies: Vec<i64> = match pipeline.query_async(&mut link).await {
            Err(error) if error.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) => {
                self.write.load_async(&mut link).await?;
                pipeline.query_async(&mut link).await?
            }
            other => other?,
        };
        let written = replies.first().copied().unwrap_or(0);
        let replicas = replies.get(1).map_or(self.wait_replicas, |&n| u32::try_from(n).unwrap_or(0));
        Ok((written, replicas))
    }

    /// Runs `call` on the connection, once more if the connection had dropped (Redis restarted,
    /// a failover): the manager reconnects meanwhile. Every call of this store may be repeated
    /// (a write skips frames it already stored), so a retry never applies anything twice.
    async fn with_retry<T, F, Fut>(&self, call: F) -> Result<T, ServerError>
    where
        F: Fn(Link) -> Fut,
        Fut: Future<Output = redis::RedisResult<T>>,
    {
        self.with_retry_on(&self.connection, call).await
    }

    /// [`RedisStore::with_retry`] on `link`.
    async fn with_retry_on<T, F, Fut>(&self, link: &Link, call: F) -> Result<T, ServerError>
    where
        F: Fn(Link) -> Fut,
        Fut: Future<Output = redis::RedisResult<T>>,
    {
        match call(link.clone()).await {
            Err(error) if error.is_io_error() || error.is_connection_dropped() || error.is_connection_refusal() => {
                call(link.clone()).await.map_err(|e| self.error(&e))
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
            let (state_key, log_key, patches_key) = self.keys(id);
            type Reply = (Vec<(String, Vec<u8>)>, redis::streams::StreamRangeReply, redis::streams::StreamRangeReply);
            let mut invocation = self.load.prepare_invoke();
            invocation.key(&state_key).key(&log_key).key(&patches_key);
            let invocation = &invocation;
            // One script: a write between the reads cannot pair a state with patches of another
            // (a script rather than MULTI, since a cluster client follows a slot that moved for
            // one command, not inside a transaction).
            let (fields, entries, patch_entries): Reply =
                self.with_retry(|mut link| async move { invocation.invoke_async(&mut link).await }).await?;
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
            let numbered = |reply: redis::streams::StreamRangeReply| -> Vec<(u64, String)> {
                reply
                    .ids
                    .into_iter()
                    .map(|entry| {
                        let n = entry.id.split('-').next().and_then(|n| n.parse().ok()).unwrap_or(0);
                        let text: Option<String> = entry.get("f");
                        (n, text.unwrap_or_default())
                    })
                    .collect()
            };
            let (log, patches) = (numbered(entries), numbered(patch_entries));
            Ok(Some(StoredSession { id: id.to_string(), token_hash, state, patches, log, expires_at_ms }))
        })
    }

    fn write<'a>(&'a self, id: &'a str, write: SessionWrite) -> StoreFuture<'a, Result<(), ServerError>> {
        Box::pin(async move {
            let (state_key, log_key, patches_key) = self.keys(id);
            let mut eval = redis::cmd("EVALSHA");
            eval.arg(self.write.get_hash()).arg(3).arg(&state_key).arg(&log_key).arg(&patches_key);
            eval.arg(id)
                .arg(write.token_hash.map(Vec::from).unwrap_or_default())
                .arg(if write.state.is_some() { "1" } else { "0" })
                .arg(write.state.unwrap_or_default())
                .arg(write.expires_at_ms)
                .arg(write.trim_below.map(|n| n.to_string()).unwrap_or_default())
                .arg(write.claim.as_deref().unwrap_or_default())
                .arg(write.append.len());
            for (seq, text) in write.append {
                eval.arg(seq).arg(text);
            }
            for (n, text) in write.patches {
                eval.arg(n).arg(text);
            }
            let eval = &eval;
            let (written, replicas) = self.with_retry_on(&self.writes, |link| self.write_and_wait(link, eval)).await?;
            if written != 0 && replicas < self.wait_replicas {
                return Err(ServerError::Store {
                    store: self.url.clone(),
                    problem: StoreProblem::Unavailable,
                    message: format!(
                        "session {id}'s write reached {replicas} of the {} replicas it must reach (--redis-wait-replicas) \
                         within {} ms; it counts as not stored",
                        self.wait_replicas,
                        WAIT_TIMEOUT.as_millis()
                    ),
                });
            }
            if written == 0 {
                return Err(ServerError::Store {
                    store: self.url.clone(),
                    problem: StoreProblem::Moved,
                    message: format!("session {id} is claimed by another server now; nothing was written"),
                });
            }
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
            let (state_key, log_key, patches_key) = self.keys(id);
            let index = self.index();
            // Two calls: in a cluster the index lives in another slot than the session's keys.
            self.with_retry(|mut link| {
                let (state_key, log_key, patches_key) = (state_key.clone(), log_key.clone(), patches_key.clone());
                async move {
                    redis::cmd("DEL").arg(state_key).arg(log_key).arg(patches_key).query_async::<()>(&mut link).await
                }
            })
            .await?;
            self.with_retry(|mut link| {
                let index = index.clone();
                async move { redis::cmd("ZREM").arg(index).arg(id).query_async::<()>(&mut link).await }
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

    fn shared(&self) -> bool {
        true
    }

    fn claim<'a>(
        &'a self,
        id: &'a str,
        instance: &'a str,
        expires_at_ms: u64,
    ) -> StoreFuture<'a, Result<Claim, ServerError>> {
        Box::pin(async move {
            let (state_key, ..) = self.keys(id);
            // A claim that changes between the read and the swap is read again: a few rounds
            // at most, since only a server's own claim or a takeover changes it.
            for _ in 0..8 {
                let seen = self.current_claim(&state_key).await?;
                if let Some((holder, _)) = seen.split_once('/').filter(|(holder, _)| *holder != instance) {
                    let key = self.heartbeat_key(holder);
                    let alive = self
                        .with_retry(|mut connection| {
                            let key = key.clone();
                            async move { redis::cmd("EXISTS").arg(key).query_async::<bool>(&mut connection).await }
                        })
                        .await?;
                    if alive {
                        return Ok(Claim::HeldBy(holder.to_string()));
                    }
                }
                let mut invocation = self.claim.prepare_invoke();
                invocation.key(&state_key).arg(&seen).arg(instance).arg(expires_at_ms);
                let invocation = &invocation;
                let claimed = self
                    .with_retry(|mut connection| async move {
                        invocation.invoke_async::<Option<String>>(&mut connection).await
                    })
                    .await?;
                if let Some(claim) = claimed {
                    return Ok(Claim::Claimed(claim));
                }
            }
            Err(ServerError::Store {
                store: self.url.clone(),
                problem: StoreProblem::Unavailable,
                message: format!("session {id}'s claim kept changing; try again"),
            })
        })
    }

    fn holds<'a>(&'a self, id: &'a str, claim: &'a str) -> StoreFuture<'a, Result<bool, ServerError>> {
        Box::pin(async move {
            let (state_key, ..) = self.keys(id);
            Ok(self.current_claim(&state_key).await? == claim)
        })
    }

    fn release<'a>(
        &'a self,
        id: &'a str,
        instance: &'a str,
        claim: &'a str,
    ) -> StoreFuture<'a, Result<(), ServerError>> {
        Box::pin(async move {
            let (state_key, ..) = self.keys(id);
            let mut invocation = self.release.prepare_invoke();
            invocation.key(&state_key).arg(claim).arg(instance);
            let invocation = &invocation;
            self.with_retry(|mut connection| async move { invocation.invoke_async::<i64>(&mut connection).await })
                .await
                .map(drop)
        })
    }

    fn ask_release<'a>(&'a self, id: &'a str, holder: &'a str) -> StoreFuture<'a, Result<(), ServerError>> {
        Box::pin(async move {
            let channel = self.release_channel(holder);
            self.with_retry(|mut connection| {
                let channel = channel.clone();
                async move { redis::cmd("PUBLISH").arg(channel).arg(id).query_async::<i64>(&mut connection).await }
            })
            .await
            .map(drop)
        })
    }

    fn heartbeat<'a>(&'a self, instance: &'a str, ttl: Duration) -> StoreFuture<'a, Result<(), ServerError>> {
        Box::pin(async move {
            let key = self.heartbeat_key(instance);
            let ttl_ms = ttl.as_millis() as u64;
            self.with_retry(|mut connection| {
                let key = key.clone();
                async move {
                    if ttl_ms == 0 {
                        redis::cmd("DEL").arg(key).query_async::<()>(&mut connection).await
                    } else {
                        redis::cmd("SET").arg(key).arg(1).arg("PX").arg(ttl_ms).query_async::<()>(&mut connection).await
                    }
                }
            })
            .await
        })
    }

    fn release_requests<'a>(
        &'a self,
        instance: &'a str,
    ) -> StoreFuture<'a, Result<Option<futures_util::stream::BoxStream<'static, String>>, ServerError>> {
        Box::pin(async move {
            // The first seed that answers (a message published on any node of a cluster reaches
            // every node's subscribers).
            let mut last_error = None;
            let mut connected = None;
            for seed in &self.seeds {
                match seed.get_async_pubsub().await {
                    Ok(pubsub) => {
                        connected = Some(pubsub);
                        break;
                    }
                    Err(error) => last_error = Some(error),
                }
            }
            let Some(mut pubsub) = connected else {
                return Err(self.error(&last_error.expect("at least one seed was tried")));
            };
            pubsub.subscribe(self.release_channel(instance)).await.map_err(|e| self.error(&e))?;
            let ids = futures_util::StreamExt::map(pubsub.into_on_message(), |message| {
                message.get_payload::<String>().unwrap_or_default()
            });
            Ok(Some(futures_util::StreamExt::boxed(ids)))
        })
    }
}
