-- read_account.lua: an account as it stands, changing nothing (no refill: no tier rules).
-- KEYS[1] the account hash
-- ARGV[1] hour window (us)
-- returns {tier, balance, key_hash, hour_used, created_at (us)}, or nil for no account
local a = load_account(KEYS[1])
if not a then
  return false
end
return account_reply(a, now_us(), tonumber(ARGV[1]))
