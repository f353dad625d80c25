-- create_account.lua: creates an account unless its id is taken.
-- KEYS[1] the account hash
-- ARGV[1] tier, ARGV[2] balance (micro-tokens), ARGV[3] key_hash, ARGV[4] hour window (us)
-- returns {tier, balance, key_hash, hour_used, created_at (us)}; error ACCOUNT_EXISTS
if redis.call('EXISTS', KEYS[1]) == 1 then
  return redis.error_reply('ACCOUNT_EXISTS')
end
local now = now_us()
redis.call('HSET', KEYS[1], 'tier', ARGV[1], 'balance', tonumber(ARGV[2]), 'key_hash', ARGV[3],
  'hour_used', 0, 'hour_window', math.floor(now / tonumber(ARGV[4])), 'refilled_at', now,
  'created_at', now, 'history_seq', 0)
return account_reply(load_account(KEYS[1]), now, tonumber(ARGV[4]))
