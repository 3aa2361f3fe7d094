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
  warm_s3                  = local.warm_source && var.warm_settings_source == "s3"
  warm_appconfig           = local.warm_source && var.warm_settings_source == "appconfig"
  settings_object_key      = "settings.json"
  settings_object_location = local.warm_s3 ? "s3://${aws_s3_bucket.settings[0].bucket}/${local.settings_object_key}" : null

  # AppConfig's names, known at plan time: the extension takes names.
  appconfig_environment = "gateway"
  appconfig_profile     = "settings"
  appconfig_location    = local.warm_appconfig ? "appconfig:${var.name}/${local.appconfig_environment}/${local.appconfig_profile}" : null

  # SettingsSource, either way.
  settings_source = local.warm_s3 ? local.settings_object_location : local.appconfig_location
}

resource "aws_s3_bucket" "settings" {
  count = local.warm_s3 ? 1 : 0
  # 37 characters at most: 28 of the name and -warm- leave room.
  bucket_prefix = "${lower(substr(replace(var.name, "_", "-"), 0, 28))}-warm-"
  tags          = var.tags
}

resource "aws_s3_bucket_public_access_block" "settings" {
  count                   = local.warm_s3 ? 1 : 0
  bucket                  = aws_s3_bucket.settings[0].id
  block_public_acls       = true
  block_public_policy     = true
  ignore_public_acls      = true
  restrict_public_buckets = true
}

resource "aws_s3_object" "warm_settings" {
  count        = local.warm_s3 ? 1 : 0
  bucket       = aws_s3_bucket.settings[0].id
  key          = local.settings_object_key
  content      = jsonencode(var.warm_settings)
  content_type = "application/json"
  tags         = var.tags
}

# --- or AWS AppConfig (warm_settings_source = appconfig) ---------------------
#
# A hosted configuration (AWS.Freeform, the JSON of warm_settings), deployed
# all at once to the environment "gateway"; the function reads it through the
# AppConfig Agent Lambda extension (its layer, appconfig_extension_layer_arn),
# which holds the configuration session and polls AppConfig every
# AWS_APPCONFIG_EXTENSION_POLL_INTERVAL_SECONDS (set to settings_refresh_secs)
# with the function's role; the gateway reads the extension's local endpoint
# (SettingsSource=appconfig:<application>/<environment>/<profile>). A change
# of warm_settings is a new hosted configuration version and a new
# deployment: nothing of the function changes.

resource "aws_appconfig_application" "settings" {
  count = local.warm_appconfig ? 1 : 0
  name  = var.name
  tags  = var.tags
}

resource "aws_appconfig_environment" "settings" {
  count          = local.warm_appconfig ? 1 : 0
  application_id = aws_appconfig_application.settings[0].id
  name           = local.appconfig_environment
  tags           = var.tags
}

resource "aws_appconfig_configuration_profile" "settings" {
  count          = local.warm_appconfig ? 1 : 0
  application_id = aws_appconfig_application.settings[0].id
  name           = local.appconfig_profile
  location_uri   = "hosted"
  type           = "AWS.Freeform"
  tags           = var.tags
}

resource "aws_appconfig_hosted_configuration_version" "settings" {
  count                    = local.warm_appconfig ? 1 : 0
  application_id           = aws_appconfig_application.settings[0].id
  configuration_profile_id = aws_appconfig_configuration_profile.settings[0].configuration_profile_id
  content                  = jsonencode(var.warm_settings)
  content_type             = "application/json"
}

resource "aws_appconfig_deployment" "settings" {
  count                    = local.warm_appconfig ? 1 : 0
  application_id           = aws_appconfig_application.settings[0].id
  environment_id           = aws_appconfig_environment.settings[0].environment_id
  configuration_profile_id = aws_appconfig_configuration_profile.settings[0].configuration_profile_id
  configuration_version    = tostring(aws_appconfig_hosted_configuration_version.settings[0].version_number)
  # A predefined strategy: the whole environment at once, no bake time.
  deployment_strategy_id = "AppConfig.AllAtOnce"
  tags                   = var.tags
}
