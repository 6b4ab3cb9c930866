-- wrk script: short-lived connections. Every PER_CONN-th request of this
-- wrk thread (default 10) carries `Connection: close`; the server answers
-- with `Connection: close` and wrk opens a new connection. With one wrk
-- thread over many connections the count is per thread, so connections
-- carry PER_CONN requests on average.
local per_conn = tonumber(os.getenv("PER_CONN")) or 10
local n = 0
local keep, close

init = function(args)
   keep = wrk.format(nil)
   close = wrk.format(nil, nil, { ["Connection"] = "close" })
end

request = function()
   n = n + 1
   if n % per_conn == 0 then
      return close
   end
   return keep
end
