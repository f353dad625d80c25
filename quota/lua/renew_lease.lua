-- renew_lease.lua: records a lease's cumulative spending and grants up to `want` more.
-- Idempotent by seq: the last applied seq returns its grant again; an older one returns the
-- lease as it stands (granted 0) and changes nothing. The spent total never decreases and, on a
-- metered lease, never passes what was granted.
-- KEYS[1] the account hash, KEYS[2] its open-lease zset, KEYS[3] the lease hash
-- ARGV[1] lease id, ARGV[2] seq, ARGV[3] spent_total, ARGV[4] want, ARGV[5] hourly cap (-1: none),
-- ARGV[6] refill (micro-tokens per period), ARGV[7] refill_max, ARGV[8] refill period (us),
-- ARGV[9] hour window (us), ARGV[10] lease key prefix
-- returns {granted, held, balance, hour_left (-1: none), open_leases};
-- error LEASE_NOT_FOUND (no such account or lease, closed, or expired)
local a = load_account(KEYS[1])
if not a then
  return redis.error_reply('LEASE_NOT_FOUND')
end
local l = redis.call('HMGET', KEYS[3], 'open', 'seq', 'granted_total', 'spent_total', 'metered', 'ttl')
if l[1] ~= '1' then
  return redis.error_reply('LEASE_NOT_FOUND')
end
local seq, stored_seq = tonumber(ARGV[2]), tonumber(l[2])
local granted_total, spent_total = tonumber(l[3]), tonumber(l[4])
local metered, cap, hour_us = l[5] == '1', tonumber(ARGV[5]), tonumber(ARGV[9])
local now = now_us()
local expires_at = tonumber(redis.call('ZSCORE', KEYS[2], ARGV[1]))
local expired = expires_at == nil or expires_at <= now
if not expired and seq <= stored_seq then
  if seq == stored_seq then
    return recall(KEYS[3], 'last')
  end
  return {0, math.max(0, granted_total - spent_total), a.balance, hour_left_now(a, now, hour_us, cap),
    redis.call('ZCARD', KEYS[2])}
end
roll_window(a, now, hour_us)
refill(a, now, tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8]))
settle_expired(a, KEYS[2], ARGV[10], now)
if expired then
  save_account(a)
  return redis.error_reply('LEASE_NOT_FOUND expired')
end
spent_total = math.max(spent_total, tonumber(ARGV[3]))
if metered then
  spent_total = math.min(spent_total, granted_total)
end
local granted = grantable(a, tonumber(ARGV[4]), metered, cap)
if metered then
  a.balance = a.balance - granted
  a.hour_used = a.hour_used + granted
end
save_account(a)
granted_total = granted_total + granted
redis.call('HSET', KEYS[3], 'granted_total', granted_total, 'spent_total', spent_total, 'seq', seq, 'last_seen', now)
redis.call('ZADD', KEYS[2], now + tonumber(l[6]), ARGV[1])
local g = {granted, math.max(0, granted_total - spent_total), a.balance, hour_left(a, cap), redis.call('ZCARD', KEYS[2])}
return remember(KEYS[3], 'last', g)
