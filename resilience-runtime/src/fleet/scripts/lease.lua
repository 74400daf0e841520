-- A fleet bulkhead's admission: one lease of at most ARGV[1] at once (on Redis time).
-- KEYS[1]  the instance's leases: a sorted set of lease ids scored by expiry (µs)
-- ARGV[1]  the limit
-- ARGV[2]  how long a lease lasts unless renewed (µs)
-- ARGV[3]  the new lease's id
-- Returns {1, leases held} when the lease was taken, {0, leases held} when all were held.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local ttl = tonumber(ARGV[2])
-- The leases of replicas that stopped renewing them (killed mid-call) lapse here.
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local held = redis.call('ZCARD', KEYS[1])
if held >= tonumber(ARGV[1]) then
  return {0, held}
end
redis.call('ZADD', KEYS[1], now + ttl, ARGV[3])
-- Replicas may hold leases of other lengths: the key's expiry is only ever pushed later.
if redis.call('PTTL', KEYS[1]) < math.ceil(ttl / 1000) then
  redis.call('PEXPIRE', KEYS[1], math.ceil(ttl / 1000))
end
return {1, held + 1}
