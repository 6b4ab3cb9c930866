-- wrk script: sends DEPTH requests (default 16, TechEmpower's plaintext
-- depth) in one write; wrk counts each response.
local depth = tonumber(os.getenv("DEPTH")) or 16
local batch

init = function(args)
   local r = {}
   for i = 1, depth do
      r[i] = wrk.format(nil)
   end
   batch = table.concat(r)
end

request = function()
   return batch
end
