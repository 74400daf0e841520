-- A replica says it is alive, learns how many are, and renews the leases it holds (on Redis
-- time, so that the replicas' clocks never matter).
-- KEYS[1]  the instance's replicas: a sorted set of replica ids scored by expiry (µs)
-- KEYS[2]  (a bulkhead's) the instance's leases: a sorted set of lease ids scored by expiry (µs)
-- ARGV[1]  this replica's id
-- ARGV[2]  how long a heartbeat, and a lease, counts (µs)
-- ARGV[3…] the leases this replica holds
-- Returns the replicas alive, this one included.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local ttl = tonumber(ARGV[2])
-- Replicas may beat at other intervals: a key's expiry is only ever pushed later.
local function keep(key)
  local ms = math.ceil(ttl / 1000)
  if redis.call('PTTL', key) < ms then
    redis.call('PEXPIRE', key, ms)
  end
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
keep(KEYS[1])
if KEYS[2] and #ARGV > 2 then
  -- Added, not only updated: a lease a restarted Redis lost is held all the same.
  for i = 3, #ARGV do
    redis.call('ZADD', KEYS[2], now + ttl, ARGV[i])
  end
  keep(KEYS[2])
end
return redis.call('ZCARD', KEYS[1])
