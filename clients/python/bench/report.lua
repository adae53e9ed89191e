-- wrk: print one machine-readable line with the latency figures in microseconds.
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "WRK {\"requests\":%d,\"seconds\":%.3f,\"mean_us\":%.1f,\"p50_us\":%d,\"p99_us\":%d,\"errors\":%d}\n",
    summary.requests, summary.duration / 1e6, latency.mean, latency:percentile(50),
    latency:percentile(99), e.connect + e.read + e.write + e.status + e.timeout))
end
