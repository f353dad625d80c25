-- close_lease.lua: records a lease's final spending and returns what it holds unspent to the
-- balance and the hourly window. Closing a closed (or expired) lease changes nothing: the same
-- seq as the close returns the close's grant again; any other returns granted 0, held 0.
-- KEYS[1] the account hash, KEYS[2] its open-lease zset, KEYS[3] the lease hash
-- ARGV[1] lease id, ARGV[2] seq, ARGV[3] spent_total, ARGV[4] hourly cap (-1: none), ARGV[5] hour window (us)
-- returns {granted (0), held (0), balance, hour_left (-1: none), open_leases};
-- error LEASE_NOT_FOUND (no such account or lease)
local a = load_account(KEYS[1])
if not a then
  return redis.error_reply('LEASE_NOT_FOUND')
end
local l = redis.call('HMGET', KEYS[3], 'open', 'seq', 'granted_total', 'spent_total', 'metered', 'closed_by')
if not l[1] then
  return redis.error_reply('LEASE_NOT_FOUND')
end
local seq, stored_seq, cap, hour_us = tonumber(ARGV[2]), tonumber(l[2]), tonumber(ARGV[4]), tonumber(ARGV[5])
local now = now_us()
if l[1] ~= '1' then
  if l[6] == 'close' and seq == stored_seq then
    return recall(KEYS[3], 'last')
  end
  return {0, 0, a.balance, hour_left_now(a, now, hour_us, cap), redis.call('ZCARD', KEYS[2])}
end
local granted_total, metered = tonumber(l[3]), l[5] == '1'
local spent_total = math.max(tonumber(l[4]), tonumber(ARGV[3]))
if metered then
  spent_total = math.min(spent_total, granted_total)
end
roll_window(a, now, hour_us)
refund(a, granted_total - spent_total, metered)
save_account(a)
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HSET', KEYS[3], 'open', 0, 'spent_total', spent_total, 'seq', math.max(seq, stored_seq),
  'last_seen', now, 'closed_at', now, 'closed_by', 'close')
return remember(KEYS[3], 'last', {0, 0, a.balance, hour_left(a, cap), redis.call('ZCARD', KEYS[2])})
