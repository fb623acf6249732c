local counter = 0
local key = os.getenv("KEY")
request = function()
  counter = counter + 1
  local body = '{"service":"svc' .. (counter % 20) .. '","environment":"prod","version":"1.' .. counter .. '.' .. math.random(1, 1000000000) .. '","status":"Deployed"}'
  return wrk.format("POST", "/deploy", {["content-type"]="application/json", ["x-api-key"]=key}, body)
end
