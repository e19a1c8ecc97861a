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

// admitScript: KEYS per scope: rpm, tpm, conc, day, minute; then the ticket key. ARGV: now
// µs, scope count, reserved tokens, shadow (1/0), lease id, lease expiry µs, lease key TTL
// ms, day key TTL s, then per scope requests_per_minute, tokens_per_minute,
// concurrent_requests, tokens_per_day; then the ticket key TTL s.
// Returns charged, counted, then per scope the state before any change: rpm level, tpm level,
// leases in flight, tokens charged today.
//
// Idempotent by ticket: an admission that was counted keeps its reply under the ticket key,
// and the same ticket admitted again (a retry after a lost reply) gets that reply back and
// changes nothing. A refusal writes nothing, so it is simply decided again.
var admitScript = redis.NewScript(luaBucket + `
local now = tonumber(ARGV[1])
local n = tonumber(ARGV[2])
local R = tonumber(ARGV[3])
local shadow = ARGV[4] == '1'
local ticket = KEYS[n * 5 + 1]
local prev = redis.call('GET', ticket)
if prev then return cjson.decode(prev) end
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
if counted then redis.call('SET', ticket, cjson.encode(out), 'EX', ARGV[8 + 4 * n + 1]) end
return out
`)

// settleScript: KEYS per scope: tpm, conc, admission day, current minute; then the ticket
// key and the ticket's settled marker. ARGV: now µs, scope count, charged (1/0; "?" or "!" when
// the admission's reply was lost and the request was let through or refused), reserved minus used (refund, may be negative), input,
// output, lease id, day key TTL s, used minus reserved as an integer string, then per scope
// tokens_per_minute; then the marker TTL s.
//
// Idempotent by ticket: the marker is set once, and a settle that finds it (a retry after a
// lost reply) changes nothing. A ticket whose admission reply was lost learns from the ticket
// key whether the admission landed and was charged; one that did not land is recorded with
// what it used when the request was let through without the store ("?"), and left alone
// when it was refused ("!").
var settleScript = redis.NewScript(luaBucket + `
local now = tonumber(ARGV[1])
local n = tonumber(ARGV[2])
local charged = ARGV[3] == '1'
local landed = true
if ARGV[3] == '?' or ARGV[3] == '!' then
  local rep = redis.call('GET', KEYS[n * 4 + 1])
  if rep then
    charged = cjson.decode(rep)[1] == '1'
  elseif ARGV[3] == '!' then
    return 0
  else
    charged = false
    landed = false
  end
end
local used = tonumber(ARGV[5]) + tonumber(ARGV[6])
if not redis.call('SET', KEYS[n * 4 + 2], '1', 'NX', 'EX', ARGV[9 + n + 1]) then return 0 end
local refund = tonumber(ARGV[4])
for i = 1, n do
  local k = (i - 1) * 4
  local tpm = tonumber(ARGV[9 + i])
  if charged then
    if tpm > 0 then
      local l, t = level(KEYS[k + 1], tpm, now)
      l = math.min(l + refund, tpm)
      save(KEYS[k + 1], l, t, tpm)
    end
    redis.call('ZREM', KEYS[k + 2], ARGV[7])
    redis.call('HINCRBY', KEYS[k + 3], 'c', ARGV[9])
  end
  if not landed then
    -- Let through while the store was unreachable: the request and what it used still count.
    redis.call('HINCRBY', KEYS[k + 3], 'c', used)
    redis.call('HINCRBY', KEYS[k + 3], 'r', 1)
    redis.call('HINCRBY', KEYS[k + 4], 'r', 1)
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
