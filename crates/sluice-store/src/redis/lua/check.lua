-- One check: KEYS = the limit's keys;
-- ARGV = now_ms, limit, window_ms, burst, cost, flag (1/0: leaky_bucket's gcra, or
-- fixed_window counting every hit), ttl grace ms, mode (common.lua plan: 0 consume, 1 ask,
-- 2 charge, 3 refund; absent: 0).
-- Answers { allowed, remaining, reset_ms, retry_after_ms, delay_ms, remaining before,
-- reset before, refund token }.
TTL_GRACE = tonumber(ARGV[7]) or 0
return { ALGORITHM(1, tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]),
  tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6] == '1', tonumber(ARGV[8]) or 0) }
