-- Argo CD health of gpucloud's Tenant and RateCard custom resources (docs/gitops.md): put this script under
-- resource.customizations.health.gpucloud.io_Tenant and resource.customizations.health.gpucloud.io_RateCard
-- in argocd-cm. Argo CD reads no conditions by itself: without it these objects get no health at all.
-- Checked against the statuses gpucloud writes by gitops/tests/test_crds.py.
hs = { status = "Progressing", message = "waiting for gpucloud" }
if obj.metadata.deletionTimestamp ~= nil then
  hs.message = "being deleted"
  return hs
end
if obj.status == nil or obj.status.observedGeneration == nil
    or obj.status.observedGeneration < obj.metadata.generation then
  return hs
end
for _, c in ipairs(obj.status.conditions or {}) do
  if c.type == "Stalled" and c.status == "True" then
    return { status = "Degraded", message = c.message }
  end
  if c.type == "Ready" then
    if c.status == "True" then
      hs.status = "Healthy"
    end
    hs.message = c.message
  end
end
return hs
