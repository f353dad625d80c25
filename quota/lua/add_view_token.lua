-- add_view_token.lua: keeps a view token's hash for a stream, unless the account holds as many as it may.
-- KEYS[1] the account hash, KEYS[2] the account's view tokens (hash: token id -> "<created_at us>:<token hash>:<stream>")
-- ARGV[1] token id, ARGV[2] stream, ARGV[3] token hash, ARGV[4] the most view tokens an account holds
-- returns created_at (us); errors ACCOUNT_NOT_FOUND, VIEW_TOKEN_LIMIT <limit>
if redis.call('EXISTS', KEYS[1]) == 0 then
  return redis.error_reply('ACCOUNT_NOT_FOUND')
end
if redis.call('HLEN', KEYS[2]) >= tonumber(ARGV[4]) then
  return redis.error_reply('VIEW_TOKEN_LIMIT ' .. ARGV[4])
end
local now = now_us()
redis.call('HSET', KEYS[2], ARGV[1], string.format('%d:%s:%s', now, ARGV[3], ARGV[2]))
return now
