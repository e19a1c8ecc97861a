package ratelimit

import "github.com/redis/go-redis/v9"

// The scripts mirror policy.go: the same buckets (level "l", last update "t" in unix µs),
// the same checks, and nothing written unless every scope passes. Numbers go back to Go as
// strings because Redis truncates Lua numbers to integers in replies.

const luaBucket = `
local MIN = 60000000
local function level(key, cap, now)
  local v = redis.call('HMGET', key, 'l', 't')
  if not v[1] then return cap, now end
  local l, t = tonumber(v[1]), tonumber(v[2])
  if now > t then l = l + (now - t) * cap / MIN; t = now end
  if l > cap then l = cap end
  return l, t
end
local function save(key, l, t, cap)
  redis.call('HSET', key, 'l', string.format('%.17g', l), 't', string.format('%d', t))
  redis.call('PEXPIRE', key, math.ceil((cap - l) * 60000 / cap) + 1000)
end
`

// admitScript: KEYS per scope: rpm, tpm, conc, day, minute. ARGV: now µs, scope count,
// reserved tokens, shadow (1/0), lease id, lease expiry µs, lease key TTL ms, day key TTL s,
// then per scope requests_per_minute, tokens_per_minute, concurrent_requests, tokens_per_day.
// Returns charged, counted, then per scope the state before any change: rpm level, tpm level,
// leases in flight, tokens charged today.
var admitScript = redis.NewScript(luaBucket + `
local now = tonumber(ARGV[1])
local n = tonumber(ARGV[2])
local R = tonumber(ARGV[3])
local shadow = ARGV[4] == '1'
local st = {}
local ok = true
for i = 1, n do
  local k, a = (i - 1) * 5, 8 + (i - 1) * 4
  local s = {rpm = tonumber(ARGV[a + 1]), tpm = tonumber(ARGV[a + 2]), conc = tonumber(ARGV[a + 3]), tpd = tonumber(ARGV[a + 4]),
             rl = 0, rt = now, tl = 0, tt = now, cc = 0, dc = 0}
  if s.rpm > 0 then
    s.rl, s.rt = level(KEYS[k + 1], s.rpm, now)
    if s.rl < 1 then ok = false end
  end
  if s.tpm > 0 then
    s.tl, s.tt = level(KEYS[k + 2], s.tpm, now)
    if R > 0 and s.tl < math.min(R, s.tpm) then ok = false end
  end
  if s.conc > 0 then
    redis.call('ZREMRANGEBYSCORE', KEYS[k + 3], '-inf', ARGV[1])
    s.cc = redis.call('ZCARD', KEYS[k + 3])
    if s.cc >= s.conc then ok = false end
  end
  s.dc = tonumber(redis.call('HGET', KEYS[k + 4], 'c') or '0')
  if s.tpd > 0 and R > 0 and s.dc + math.min(R, s.tpd) > s.tpd then ok = false end
  st[i] = s
end
local counted = ok or shadow
local out = {ok and '1' or '0', counted and '1' or '0'}
for i = 1, n do
  local k, s = (i - 1) * 5, st[i]
  if ok then
    if s.rpm > 0 then save(KEYS[k + 1], s.rl - 1, s.rt, s.rpm) end
    if s.tpm > 0 then save(KEYS[k + 2], s.tl - R, s.tt, s.tpm) end
    if s.conc > 0 then
      redis.call('ZADD', KEYS[k + 3], ARGV[6], ARGV[5])
      redis.call('PEXPIRE', KEYS[k + 3], ARGV[7])
    end
    redis.call('HINCRBY', KEYS[k + 4], 'c', ARGV[3])
  end
  if counted then
    redis.call('HINCRBY', KEYS[k + 4], 'r', 1)
    redis.call('EXPIRE', KEYS[k + 4], ARGV[8])
    redis.call('HINCRBY', KEYS[k + 5], 'r', 1)
    redis.call('EXPIRE', KEYS[k + 5], 120)
  end
  out[#out + 1] = string.format('%.17g', s.rl)
  out[#out + 1] = string.format('%.17g', s.tl)
  out[#out + 1] = string.format('%d', s.cc)
  out[#out + 1] = string.format('%d', s.dc)
end
return out
`)

// settleScript: KEYS per scope: tpm, conc, admission day, current minute. ARGV: now µs, scope
// count, charged (1/0), reserved minus used (refund, may be negative), input, output, lease
// id, day key TTL s, used minus reserved as an integer string, settlement id, then per scope
// tokens_per_minute. A settlement id already seen (a retry whose first try ran but lost its
// reply) changes nothing and returns 0; the id is kept in the first scope's minute hash.
var settleScript = redis.NewScript(luaBucket + `
if redis.call('HSETNX', KEYS[4], 's:' .. ARGV[10], 1) == 0 then return 0 end
local now = tonumber(ARGV[1])
local n = tonumber(ARGV[2])
local charged = ARGV[3] == '1'
local refund = tonumber(ARGV[4])
for i = 1, n do
  local k = (i - 1) * 4
  local tpm = tonumber(ARGV[10 + i])
  if charged then
    if tpm > 0 then
      local l, t = level(KEYS[k + 1], tpm, now)
      l = math.min(l + refund, tpm)
      save(KEYS[k + 1], l, t, tpm)
    end
    redis.call('ZREM', KEYS[k + 2], ARGV[7])
    redis.call('HINCRBY', KEYS[k + 3], 'c', ARGV[9])
  end
  redis.call('HINCRBY', KEYS[k + 3], 'i', ARGV[5])
  redis.call('HINCRBY', KEYS[k + 3], 'o', ARGV[6])
  redis.call('EXPIRE', KEYS[k + 3], ARGV[8])
  redis.call('HINCRBY', KEYS[k + 4], 'i', ARGV[5])
  redis.call('HINCRBY', KEYS[k + 4], 'o', ARGV[6])
  redis.call('EXPIRE', KEYS[k + 4], 120)
end
return 1
`)
