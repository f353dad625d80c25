-- open_lease.lua: opens a lease holding up to `want` micro-tokens, taken from the balance and
-- counted into the hourly window at once; the same lease id again returns the first grant.
-- KEYS[1] the account hash, KEYS[2] its open-lease zset, KEYS[3] its history zset, KEYS[4] the lease hash
-- ARGV[1] lease id, ARGV[2] session id, ARGV[3] want, ARGV[4] metered (0/1), ARGV[5] max sessions,
-- ARGV[6] hourly cap (-1: none), ARGV[7] refill (micro-tokens per period), ARGV[8] refill_max,
-- ARGV[9] refill period (us), ARGV[10] hour window (us), ARGV[11] lease TTL (us),
-- ARGV[12] history limit, ARGV[13] lease key prefix, ARGV[14] the id of the node opening it
-- returns {granted, held, balance, hour_left (-1: none), open_leases};
-- errors ACCOUNT_NOT_FOUND, NOTHING_TO_SPEND, TOO_MANY_LEASES <open> <max> <s until the soonest
-- lease expires unless renewed> (no lease is created then)
local a = load_account(KEYS[1])
if not a then
  return redis.error_reply('ACCOUNT_NOT_FOUND')
end
if redis.call('EXISTS', KEYS[4]) == 1 then
  return recall(KEYS[4], 'first')
end
local want, metered, cap = tonumber(ARGV[3]), ARGV[4] == '1', tonumber(ARGV[6])
local now = now_us()
roll_window(a, now, tonumber(ARGV[10]))
refill(a, now, tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9]))
settle_expired(a, KEYS[2], ARGV[13], now)
save_account(a)
local open_leases = redis.call('ZCARD', KEYS[2])
if open_leases >= tonumber(ARGV[5]) then
  local frees_in_s = 0
  local soonest = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
  if soonest[2] then
    frees_in_s = math.max(1, math.ceil((tonumber(soonest[2]) - now) / 1000000))
  end
  return redis.error_reply(string.format('TOO_MANY_LEASES %d %d %d', open_leases, tonumber(ARGV[5]), frees_in_s))
end
local granted = grantable(a, want, metered, cap)
if metered and granted <= 0 then
  if a.balance <= 0 then
    return redis.error_reply('NOTHING_TO_SPEND no tokens left')
  end
  return redis.error_reply('NOTHING_TO_SPEND the hourly allowance is used up')
end
if metered then
  a.balance = a.balance - granted
  a.hour_used = a.hour_used + granted
  save_account(a)
end
redis.call('HSET', KEYS[4], 'session_id', ARGV[2], 'granted_total', granted, 'spent_total', 0, 'seq', 0,
  'opened_at', now, 'last_seen', now, 'ttl', tonumber(ARGV[11]), 'metered', metered and 1 or 0, 'open', 1,
  'node', ARGV[14])
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[11]), ARGV[1])
add_history(a, KEYS[3], ARGV[13], 's:' .. ARGV[1], tonumber(ARGV[12]))
local g = {granted, granted, a.balance, hour_left(a, cap), open_leases + 1}
remember(KEYS[4], 'last', g)
return remember(KEYS[4], 'first', g)
