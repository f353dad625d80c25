-- credit.lua: adds tokens to an account once per idempotency key.
-- KEYS[1] the account hash, KEYS[2] its history zset, KEYS[3] the idempotency marker
-- ARGV[1] amount (micro-tokens), ARGV[2] idempotency key, ARGV[3] marker TTL (s),
-- ARGV[4] history limit, ARGV[5] lease key prefix, ARGV[6] hour window (us),
-- ARGV[7] the most a balance may hold (micro-tokens: past 2^53 a double's sums round)
-- The marker holds '<when (us)>:<amount>' (markers from before it held the amount: '<when>').
-- returns {tier, balance, key_hash, hour_used, created_at (us)}; errors ACCOUNT_NOT_FOUND, BALANCE_LIMIT,
-- IDEMPOTENCY_KEY_REUSED <the amount the key was used for>
local a = load_account(KEYS[1])
if not a then
  return redis.error_reply('ACCOUNT_NOT_FOUND')
end
local now = now_us()
local amount = tonumber(ARGV[1])
local marker = redis.call('GET', KEYS[3])
if marker then
  local original = tonumber(string.match(marker, ':(%d+)$'))
  if original and original ~= amount then
    return redis.error_reply(string.format('IDEMPOTENCY_KEY_REUSED %d', original))
  end
  return account_reply(a, now, tonumber(ARGV[6]))  -- a retry: credited once
end
if a.balance + amount > tonumber(ARGV[7]) then
  return redis.error_reply('BALANCE_LIMIT')  -- before the key is taken: a smaller credit may use it
end
redis.call('SET', KEYS[3], string.format('%d:%d', now, amount), 'EX', tonumber(ARGV[3]))
a.balance = a.balance + amount
save_account(a)
add_history(a, KEYS[2], ARGV[5], string.format('c:%d:%d:%s', amount, now, ARGV[2]), tonumber(ARGV[4]))
return account_reply(a, now, tonumber(ARGV[6]))
