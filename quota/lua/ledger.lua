-- ledger.lua: the account arithmetic every quota script shares (not a script by itself).
-- RedisStore inserts it after each script's header comment, so each script is one EVALSHA.
-- Units: micro-tokens and microseconds of the Redis clock (TIME), integers held in Lua
-- doubles (exact below 2^53). Numbers go to redis.call as numbers (printed exactly);
-- string.format('%d') where one is part of a string (tostring() would round them).
-- MemoryStore implements the same rules in Python: change both together.

local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

local function load_account(key)
  local f = redis.call('HMGET', key, 'balance', 'hour_used', 'hour_window', 'refilled_at')
  if not f[1] then
    return nil
  end
  return {
    key = key, balance = tonumber(f[1]), hour_used = tonumber(f[2]),
    hour_window = tonumber(f[3]), refilled_at = tonumber(f[4]),
  }
end

local function save_account(a)
  redis.call('HSET', a.key, 'balance', a.balance, 'hour_used', a.hour_used,
    'hour_window', a.hour_window, 'refilled_at', a.refilled_at)
end

-- The hourly window: index floor(now / hour); a new window starts with nothing used.
local function roll_window(a, now, hour_us)
  local window = math.floor(now / hour_us)
  if window ~= a.hour_window then
    a.hour_window = window
    a.hour_used = 0
  end
end

-- hour_used as roll_window would leave it, without changing the account
local function used_now(a, now, hour_us)
  if math.floor(now / hour_us) ~= a.hour_window then
    return 0
  end
  return a.hour_used
end

-- -1: no hourly cap
local function hour_left(a, cap)
  if cap < 0 then
    return -1
  end
  return math.max(0, cap - a.hour_used)
end

-- hour_left as it would be after roll_window, without changing the account
local function hour_left_now(a, now, hour_us, cap)
  if cap < 0 then
    return -1
  end
  return math.max(0, cap - used_now(a, now, hour_us))
end

-- Continuous refill of refill_micro per period_us while the balance is below refill_max;
-- a balance at or above it (a credit) is never reduced. A refill too small to add a whole
-- micro-token keeps refilled_at, so that frequent calls still accumulate.
local function refill(a, now, refill_micro, refill_max, period_us)
  if refill_micro <= 0 or period_us <= 0 or a.balance >= refill_max then
    a.refilled_at = now
    return
  end
  local add = math.floor((now - a.refilled_at) * refill_micro / period_us)
  if add <= 0 then
    return
  end
  a.balance = math.min(refill_max, a.balance + add)
  a.refilled_at = now
end

-- What a grant can move into a lease now: all of want if unmetered, else what the
-- balance and the hourly cap allow.
local function grantable(a, want, metered, cap)
  if not metered then
    return want
  end
  local available = a.balance
  if cap >= 0 then
    available = math.min(available, cap - a.hour_used)
  end
  return math.max(0, math.min(want, available))
end

-- Unspent tokens of a metered lease go back to the balance and to the current window.
local function refund(a, amount, metered)
  if metered and amount > 0 then
    a.balance = a.balance + amount
    a.hour_used = math.max(0, a.hour_used - amount)
  end
end

-- Leases not renewed within their TTL (score <= now) are settled: what they hold is
-- refunded; they stay in the history, closed.
local function settle_expired(a, open_key, lease_prefix, now)
  local ids = redis.call('ZRANGEBYSCORE', open_key, '-inf', now)
  for _, id in ipairs(ids) do
    local lease_key = lease_prefix .. id
    local l = redis.call('HMGET', lease_key, 'granted_total', 'spent_total', 'metered')
    refund(a, (tonumber(l[1]) or 0) - (tonumber(l[2]) or 0), l[3] == '1')
    redis.call('HSET', lease_key, 'open', 0, 'closed_at', now, 'closed_by', 'expiry')
    redis.call('ZREM', open_key, id)
  end
end

-- A grant as scripts return it: {granted, held, balance, hour_left (-1: none), open_leases},
-- remembered on the lease under `tag` ('first': the open, 'last': the operation numbered seq).
local function remember(lease_key, tag, g)
  redis.call('HSET', lease_key, tag .. '_granted', g[1], tag .. '_held', g[2], tag .. '_balance', g[3],
    tag .. '_hour_left', g[4], tag .. '_open_leases', g[5])
  return g
end

local function recall(lease_key, tag)
  local f = redis.call('HMGET', lease_key, tag .. '_granted', tag .. '_held', tag .. '_balance',
    tag .. '_hour_left', tag .. '_open_leases')
  return {tonumber(f[1]), tonumber(f[2]), tonumber(f[3]), tonumber(f[4]), tonumber(f[5])}
end

-- Appends an entry to the history, dropping the oldest beyond `limit` (with the data of
-- closed leases that only their entry referred to).
local function add_history(a, history_key, lease_prefix, member, limit)
  local n = redis.call('HINCRBY', a.key, 'history_seq', 1)
  redis.call('ZADD', history_key, n, member)
  local extra = redis.call('ZCARD', history_key) - limit
  if extra > 0 then
    for _, old in ipairs(redis.call('ZRANGE', history_key, 0, extra - 1)) do
      if string.sub(old, 1, 2) == 's:' then
        local lease_key = lease_prefix .. string.sub(old, 3)
        if redis.call('HGET', lease_key, 'open') ~= '1' then
          redis.call('DEL', lease_key)
        end
      end
    end
    redis.call('ZREMRANGEBYRANK', history_key, 0, extra - 1)
  end
end

-- The account as get_account returns it: {tier, balance, key_hash, hour_used, created_at}
local function account_reply(a, now, hour_us)
  local f = redis.call('HMGET', a.key, 'tier', 'key_hash', 'created_at')
  return {f[1], a.balance, f[2], used_now(a, now, hour_us), tonumber(f[3])}
end

