-- settle_lease.lua: settles one lease that a node's previous run left open (the node crashed or was
-- killed), as the store settles a lease it stops hearing from: spent up to the last renewal, the rest
-- refunded, its session slot free. A lease that is closed, or another node's, is left as it is.
-- KEYS[1] the account hash, KEYS[2] its open-lease zset, KEYS[3] the lease hash
-- ARGV[1] lease id, ARGV[2] node id, ARGV[3] hour window (us), ARGV[4] lease key prefix
-- returns 1 when the lease was settled, else 0
local a = load_account(KEYS[1])
if not a then
  return 0
end
local l = redis.call('HMGET', KEYS[3], 'open', 'node', 'granted_total', 'spent_total', 'metered')
if l[1] ~= '1' or l[2] ~= ARGV[2] then
  return 0
end
local now = now_us()
roll_window(a, now, tonumber(ARGV[3]))
settle_expired(a, KEYS[2], ARGV[4], now)
if redis.call('ZSCORE', KEYS[2], ARGV[1]) == false then
  save_account(a)
  return 0  -- it had expired: settled just now, as any expired lease
end
refund(a, tonumber(l[3]) - tonumber(l[4]), l[5] == '1')
save_account(a)
redis.call('HSET', KEYS[3], 'open', 0, 'closed_at', now, 'closed_by', 'node_restart')
redis.call('ZREM', KEYS[2], ARGV[1])
return 1
