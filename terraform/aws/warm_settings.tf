# WARM settings in a settings document in S3
# (docs/settings.md#reloading-settings-warm-and-cold): the JSON object of
# warm_settings in a bucket of its own, which the function polls with a
# conditional GET (If-None-Match its ETag). The function's only environment
# variable for it is SettingsSource, the object's location, written once: a
# change of warm_settings rewrites the object, changes no environment
# variable, so Lambda publishes no new configuration and keeps every warm
# execution environment; each reloads within SettingsRefreshSecs.
#
# A bucket of its own, not the results bucket: the results bucket's
# lifecycle rule expires every object (the document would vanish after
# result_retention_days), and the function may write there (the document
# must not be writable by the function). The role may only read this one
# object (statement SettingsObject in main.tf).

locals {
  warm_source              = var.warm_settings != null
  settings_object_key      = "settings.json"
  settings_object_location = local.warm_source ? "s3://${aws_s3_bucket.settings[0].bucket}/${local.settings_object_key}" : null
}

resource "aws_s3_bucket" "settings" {
  count = local.warm_source ? 1 : 0
  # 37 characters at most: 28 of the name and -warm- leave room.
  bucket_prefix = "${lower(substr(replace(var.name, "_", "-"), 0, 28))}-warm-"
  tags          = var.tags
}

resource "aws_s3_bucket_public_access_block" "settings" {
  count                   = local.warm_source ? 1 : 0
  bucket                  = aws_s3_bucket.settings[0].id
  block_public_acls       = true
  block_public_policy     = true
  ignore_public_acls      = true
  restrict_public_buckets = true
}

resource "aws_s3_object" "warm_settings" {
  count        = local.warm_source ? 1 : 0
  bucket       = aws_s3_bucket.settings[0].id
  key          = local.settings_object_key
  content      = jsonencode(var.warm_settings)
  content_type = "application/json"
  tags         = var.tags
}
