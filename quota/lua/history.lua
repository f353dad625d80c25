-- history.lua: an account's newest history entries (expired leases settled first).
-- KEYS[1] the account hash, KEYS[2] its history zset, KEYS[3] its open-lease zset
-- ARGV[1] limit, ARGV[2] lease key prefix, ARGV[3] hour window (us)
-- returns newest first: {"c:<amount>:<at us>:<key>"} or {"s:<lease id>", session_id, spent_total,
-- open (0/1), opened_at (us)}; error ACCOUNT_NOT_FOUND
local a = load_account(KEYS[1])
if not a then
  return redis.error_reply('ACCOUNT_NOT_FOUND')
end
local now = now_us()
roll_window(a, now, tonumber(ARGV[3]))
settle_expired(a, KEYS[3], ARGV[2], now)
save_account(a)
local entries = {}
local limit = tonumber(ARGV[1])
if limit <= 0 then
  return entries
end
for _, member in ipairs(redis.call('ZREVRANGE', KEYS[2], 0, limit - 1)) do
  if string.sub(member, 1, 2) == 's:' then
    local f = redis.call('HMGET', ARGV[2] .. string.sub(member, 3), 'session_id', 'spent_total', 'open', 'opened_at')
    if f[1] then
      entries[#entries + 1] = {member, f[1], tonumber(f[2]), tonumber(f[3]), tonumber(f[4])}
    end
  else
    entries[#entries + 1] = {member}
  end
end
return entries
