local counter = 0
local key = os.getenv("KEY")
request = function()
  counter = counter + 1
  return wrk.format("GET", "/put?app=svc" .. (counter % 20) .. "&env=prod&version=1." .. counter .. "." .. math.random(1, 1000000000) .. "&status=Deployed", {["x-api-key"]=key})
end
