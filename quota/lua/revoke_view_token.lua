-- revoke_view_token.lua: forgets one of the account's view tokens, if it plays the given stream.
-- KEYS[1] the account's view tokens (hash: token id -> "<created_at us>:<token hash>:<stream>")
-- ARGV[1] token id, ARGV[2] stream
-- returns the revoked token's hash (its index key is the caller's to delete), or nil for no such token
local entry = redis.call('HGET', KEYS[1], ARGV[1])
if not entry then
  return false
end
local _, token_hash, stream = string.match(entry, '^(%d+):(%x+):(.*)$')
if stream ~= ARGV[2] then
  return false
end
redis.call('HDEL', KEYS[1], ARGV[1])
return token_hash
