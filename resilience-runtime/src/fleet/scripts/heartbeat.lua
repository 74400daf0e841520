-- A replica says it is alive, and learns how many are (on Redis time, so that the replicas'
-- clocks never matter).
-- KEYS[1]  the instance's replicas: a sorted set of replica ids scored by expiry (µs)
-- ARGV[1]  this replica's id
-- ARGV[2]  how long a heartbeat counts (µs)
-- Returns the replicas alive, this one included.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local ttl = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
redis.call('PEXPIRE', KEYS[1], math.ceil(ttl / 1000))
return redis.call('ZCARD', KEYS[1])
