"""SCIM 2.0 (RFC 7643/7644): identity providers provision and deprovision people and groups (docs/scim.md).

`views` serves /scim/v2/ with scim2-server's protocol core, `storage` maps its resources onto gpucloud's
rows, `filters` turns SCIM filters into database queries, and `services` holds the writes.
"""
