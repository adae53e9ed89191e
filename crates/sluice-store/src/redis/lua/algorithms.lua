-- Every algorithm by the code the batch and refund calls send for it: its check and refund
-- functions, how many keys its state takes, and the flag its check function takes last
-- (`leaky`: gcra's leaky_bucket mode, or fixed_window counting every hit); `every_hit`: its
-- denials never cancel a batch (its hits count whatever the others answer). Code 7, a
-- calendar window, takes its frame's origin in burst's place (fixed_window.lua).
local ALGORITHMS = {
  [0] = { check = fixed_window, refund = fixed_window_refund, keys = 1 },
  [1] = { check = sliding_window_counter, refund = sliding_window_counter_refund, keys = 1 },
  [2] = { check = sliding_window_log, refund = sliding_window_log_refund, keys = 2 },
  [3] = { check = token_bucket, refund = token_bucket_refund, keys = 1 },
  [4] = { check = gcra, refund = gcra_refund, keys = 1 },
  [5] = { check = gcra, refund = gcra_refund, keys = 1, leaky = true },
  [6] = { check = fixed_window, refund = fixed_window_refund, keys = 1, leaky = true,
    every_hit = true },
  [7] = { check = calendar_window, refund = calendar_window_refund, keys = 1 },
}
