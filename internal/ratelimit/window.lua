-- Sliding-window log limiter: one sorted set per client, scored by request
-- time in milliseconds, one unique member per allowed request. Exact: at
-- most `limit` requests are allowed in any window of `window_ms`.
--
-- KEYS[1] = the client's window (a sorted set)
-- ARGV[1] = window in milliseconds (positive integer)
-- ARGV[2] = limit (positive integer; 0: the limiter is off and counts nothing)
-- ARGV[3] = a member unique to this request
-- Returns {allowed (1|0), remaining, retry_after_ms}.
local window = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
if limit == 0 then
  return {1, 0, 0} -- off: a one-trip script's window step allows all
end
if not window or window < 1 or not limit or limit < 1 or not ARGV[3] or ARGV[3] == '' then
  return redis.error_reply('ERR ratelimit: bad arguments')
end

-- Redis's clock, not the app servers': every instance shares one timeline.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local count = redis.call('ZCARD', KEYS[1])
if count >= limit then
  -- Denied requests are not recorded: a client hammering while limited
  -- does not push its own window forward.
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  local retry = window
  if oldest[2] then
    retry = tonumber(oldest[2]) + window - now
  end
  return {0, 0, retry}
end
redis.call('ZADD', KEYS[1], now, ARGV[3])
redis.call('PEXPIRE', KEYS[1], window)
return {1, limit - count - 1, 0}
