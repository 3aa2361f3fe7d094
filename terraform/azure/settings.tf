# The gateway's app settings (docs/settings.md#settings): one entry per setting, named as the
# gateway reads it. A setting whose value equals the gateway's default is left
# out, so the gateway applies its own default and holds only what was set
# against the execution limit. make test checks offline (terraform/ Go test)
# that every name here is a setting the gateway reads and that the variables'
# and gateway_defaults' values are the gateway's defaults.

locals {
  gateway_settings = {
    Hosts                 = join(",", var.hosts)
    Routes                = var.routes == null ? null : jsonencode(var.routes)
    DefaultTTLSecs        = tostring(var.default_ttl_secs)
    Timeout               = tostring(var.timeout)
    MaxAttempts           = tostring(var.max_attempts)
    RetryBackoffMs        = tostring(var.retry_backoff_ms)
    MaxRetryBodyBytes     = tostring(var.max_retry_body_bytes)
    MaxBufferedBytes      = tostring(var.max_buffered_bytes)
    ClientBodyTimeoutMs   = tostring(var.client_body_timeout_ms)
    FunctionLimitMarginMs = tostring(var.function_limit_margin_ms)
    AsyncModeEnabled      = tostring(var.async_mode_enabled)
    AsyncTriggerTimeout   = tostring(var.async_trigger_timeout)
    AsyncTimeout          = tostring(var.async_timeout)
    AsyncTTLSecs          = tostring(var.async_ttl_secs)
    UserProfiles          = var.user_profiles
    FunctionTimeoutSecs   = tostring(var.function_timeout_secs)
    PublicBaseURL         = var.public_base_url
    MaxContinuations      = tostring(var.max_continuations)

    RetryBudgetPercent        = tostring(var.retry_budget_percent)
    RetryBudgetMinConcurrency = tostring(var.retry_budget_min_concurrency)

    AsyncInlineResultBytes     = tostring(var.async_inline_result_bytes)
    MaxContinuationsPerProfile = var.max_continuations_per_profile == null ? null : tostring(var.max_continuations_per_profile)
    IdempotencyScopeHeaders    = join(",", var.idempotency_scope_headers)
    TrustedProxies             = length(var.trusted_proxies) == 0 ? null : join(",", var.trusted_proxies)
    GatewayEndpointLogLevel    = var.gateway_endpoint_log_level
    LoadBalanceMode            = var.load_balance_mode
    RetryOnStatusCodes         = join(",", var.retry_on_status_codes)
    AsyncPredictWindow         = var.async_predict_window == null ? null : tostring(var.async_predict_window)
    MaxResponseHeaderBytes     = tostring(var.max_response_header_bytes)
    AsyncPollMaxSecs           = tostring(var.async_poll_max_secs)

    # How the source of warm_settings is read (warm_settings.tf).
    SettingsRefreshSecs    = tostring(var.settings_refresh_secs)
    SettingsSourceOptional = tostring(var.settings_source_optional)
    SettingsLabel          = var.settings_label
  }

  # The gateway's defaults, as it writes them (settings.Settings' tags; the
  # source's settings: internal/settings).
  gateway_defaults = {
    DefaultTTLSecs        = "300"
    Timeout               = "1200000"
    RetryBackoffMs        = "25"
    MaxRetryBodyBytes     = "10485760"
    MaxBufferedBytes      = "134217728"
    ClientBodyTimeoutMs   = "30000"
    FunctionLimitMarginMs = "1000"
    AsyncModeEnabled      = "false"
    AsyncTriggerTimeout   = "10000"
    AsyncTimeout          = "1800000"
    AsyncTTLSecs          = "86400"
    MaxContinuations      = "16"

    RetryBudgetPercent        = "20"
    RetryBudgetMinConcurrency = "3"

    AsyncInlineResultBytes  = "1048576"
    IdempotencyScopeHeaders = "Authorization"
    GatewayEndpointLogLevel = "info"
    LoadBalanceMode         = "priority"
    RetryOnStatusCodes      = "429,502,503,504"
    MaxResponseHeaderBytes  = "1048576"
    AsyncPollMaxSecs        = "30"

    SettingsRefreshSecs    = "30"
    SettingsSourceOptional = "false"
  }

  app_settings = merge(
    { for k, v in local.gateway_settings : k => v if v != null && v != try(local.gateway_defaults[k], null) },
    local.host_settings,
    local.otel_settings,
    # The source of warm_settings (warm_settings.tf), written once: a change
    # of a WARM setting changes the source, no setting here.
    local.warm_source ? { SettingsSource = local.app_configuration_endpoint } : {},
  )
}
