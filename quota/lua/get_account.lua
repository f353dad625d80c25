-- get_account.lua: an account after its tier's refill and the settling of expired leases.
-- KEYS[1] the account hash, KEYS[2] its open-lease zset
-- ARGV[1] lease key prefix, ARGV[2] hour window (us), ARGV[3] refill (micro-tokens per period),
-- ARGV[4] refill_max (micro-tokens), ARGV[5] refill period (us)
-- returns {tier, balance, key_hash, hour_used, created_at (us)}; error ACCOUNT_NOT_FOUND
local a = load_account(KEYS[1])
if not a then
  return redis.error_reply('ACCOUNT_NOT_FOUND')
end
local now, hour_us = now_us(), tonumber(ARGV[2])
roll_window(a, now, hour_us)
refill(a, now, tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]))
settle_expired(a, KEYS[2], ARGV[1], now)
save_account(a)
return account_reply(a, now, hour_us)
