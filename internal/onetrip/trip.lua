#!lua
-- One trip: a request's checks and its route's first Redis step in one
-- script call. onetrip.go fills each slot below with its owner's own
-- script, unchanged.
--
-- KEYS: the window's, the session check's (ARGV[4] of them; -1: none),
-- the step's. ARGV: the window's three, the session check's key and
-- argument counts, '1' when the route is public (its step runs whatever
-- the session answers) else '0', the session check's arguments, the
-- step's. Answers: the window's triple when it refuses; {1, remaining,
-- 0, session reply} when the session does not admit a signed-in route's
-- request; else {1, remaining, 0, session reply or false, step reply}.
--
-- Each part is a local function taking KEYS and ARGV as parameters, which
-- shadow the globals, so each sees exactly the keys and arguments it would
-- see if it ran alone.

-- The rate limiter's sliding window (ratelimit's window.lua).
local function window(KEYS, ARGV)
{{window}}
end

-- The session check (auth's check.lua): the session is live and the
-- token is its current one.
local function session(KEYS, ARGV)
{{session}}
end

-- Whether the session check's reply admits the request (auth's AdmitLua).
local function admits(reply, KEYS, ARGV)
{{admits}}
end

-- The route's step: a purchase's reservation, a waiting room's join, a
-- product read; or nothing, when the checks run alone before the route.
local function step(KEYS, ARGV)
{{step}}
end

-- 1. The window: a request over the limit does nothing else.
local r = window({KEYS[1]}, {ARGV[1], ARGV[2], ARGV[3]})
if r.err or r[1] ~= 1 then
  return r
end

-- 2. The session check, when the request bears a token (ARGV[4] is the
-- number of its keys, -1 for none): on a signed-in route a revoked
-- session does nothing else; a public route's reads anonymously.
local nk, na = tonumber(ARGV[4]), tonumber(ARGV[5])
local public = ARGV[6] == '1'
local c = false
local k, a = 2, 7
if nk >= 0 then
  local ck, ca = {}, {}
  for i = 1, nk do ck[i] = KEYS[k]; k = k + 1 end
  for i = 1, na do ca[i] = ARGV[a]; a = a + 1 end
  c = session(ck, ca)
  if type(c) == 'table' and c.err then
    return c
  end
  local ok = admits(c, ck, ca)
  if c == nil then
    c = false
  end
  if not ok and not public then
    return {r[1], r[2], r[3], c}
  end
end

-- 3. The step, with the keys and arguments left.
local fk, fa = {}, {}
for i = k, #KEYS do fk[#fk + 1] = KEYS[i] end
for i = a, #ARGV do fa[#fa + 1] = ARGV[i] end
local f = step(fk, fa)
if type(f) == 'table' and f.err then
  return f
end
return {r[1], r[2], r[3], c, f}
