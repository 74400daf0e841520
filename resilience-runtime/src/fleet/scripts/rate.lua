-- One admission of a fleet rate limiter: the local limiter's timeline, on Redis time. Time is
-- cut into cycles of `period` counted from the epoch; each has `limit` permissions; a caller
-- that finds none left reserves one of a later cycle when it starts within `timeout`.
-- KEYS[1]  "c u": c = the cycle of the next free permission, u = the permissions of c taken
-- ARGV[1]  limit_for_period
-- ARGV[2]  limit_refresh_period (µs)
-- ARGV[3]  timeout_duration (µs)
-- ARGV[4]  the permissions wanted at once (a batch; a reservation takes one)
-- Returns {outcome, wait (µs), left, taken, cycle left (µs)}: 1 granted `taken` (at least one,
-- at most the batch) of the current cycle, which ends in `cycle left`; 2 reserved one, its cycle
-- starts in `wait`; 0 refused, the earliest free permission's cycle starts in `wait`.
-- `left`: the permissions left in the current cycle, negative when reserved ahead.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local limit = tonumber(ARGV[1])
local period = tonumber(ARGV[2])
local timeout = tonumber(ARGV[3])
local batch = tonumber(ARGV[4])
local current = math.floor(now / period)
local c, u = current, 0
local state = redis.call('GET', KEYS[1])
if state then
  local space = string.find(state, ' ', 1, true)
  c = tonumber(string.sub(state, 1, space - 1))
  u = tonumber(string.sub(state, space + 1))
end
if c < current then
  c = current
  u = 0
end
if u >= limit then
  c = c + 1
  u = 0
end
local function left(taken)
  if c == current then
    return limit - taken
  end
  return -((c - current - 1) * limit + taken)
end
local wait = 0
if c > current then
  wait = c * period - now
end
if wait > timeout then
  return {0, wait, left(u), 0, 0}
end
local taken = 1
if wait == 0 then
  taken = math.min(batch, limit - u)
end
-- Gone by itself once its last cycle is over.
redis.call('SET', KEYS[1], string.format('%d %d', c, u + taken), 'PX',
  math.ceil(((c + 1) * period - now) / 1000) + 1)
if wait == 0 then
  return {1, 0, left(u + taken), taken, (current + 1) * period - now}
end
return {2, wait, left(u + 1), 1, 0}
