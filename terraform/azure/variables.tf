# ---------------------------------------------------------------------------
# Platform
# ---------------------------------------------------------------------------

variable "name" {
  description = "Base name of the resources, 3-32 lowercase letters, digits and hyphens: the function app takes it as is, so it must be globally unique (<name>.azurewebsites.net); the plan, logs and insights add a suffix; the storage account takes its letters and digits plus a generated suffix unless storage_account_name is given. No default: two deployments must not share it."
  type        = string
  nullable    = false

  # 32: the function app's host name label stays inside App Service's limit
  # with the suffixes the plan (-plan) and the logs (-logs, -insights) add.
  validation {
    condition     = can(regex("^[a-z0-9][a-z0-9-]{1,30}[a-z0-9]$", var.name))
    error_message = "The name value must be 3-32 lowercase letters, digits and hyphens, starting and ending with a letter or digit."
  }
}

variable "resource_group_name" {
  description = "The existing resource group to deploy into."
  type        = string
  nullable    = false
}

variable "location" {
  description = "The Azure region (one that offers Flex Consumption)."
  type        = string
  nullable    = false
}

variable "storage_account_name" {
  description = "The storage account's name (3-24 lowercase letters and digits, globally unique). null: name's letters and digits (at most 18) and a 6-digit suffix derived from the resource group and name."
  type        = string
  default     = null

  validation {
    condition     = var.storage_account_name == null || can(regex("^[a-z0-9]{3,24}$", coalesce(var.storage_account_name, "abc")))
    error_message = "The storage_account_name value must be 3-24 lowercase letters and digits."
  }
}

variable "runtime_version" {
  description = "The Flex Consumption runtime version of the custom runtime (runtime_name is always custom: the gateway is a custom handler)."
  type        = string
  default     = "1.0"
  nullable    = false
}

variable "instance_memory_in_mb" {
  # Flex Consumption's instance sizes: 512, 2048 (default) and 4096 MB
  # ("Azure Functions Flex Consumption plan hosting", Instance memory). Also
  # written as the app setting InstanceMemoryMB: the gateway's soft memory
  # limit is 80 % of it, and max_buffered_bytes and max_retry_body_bytes
  # must fit under that limit.
  description = "Memory of each Flex Consumption instance, in MB: 512, 2048 or 4096. Also written as the app setting InstanceMemoryMB, from which the gateway sets its soft memory limit (80 %); max_buffered_bytes and max_retry_body_bytes must fit under it."
  type        = number
  default     = 2048
  nullable    = false

  validation {
    condition     = contains([512, 2048, 4096], var.instance_memory_in_mb)
    error_message = "The instance_memory_in_mb value must be 512, 2048 or 4096."
  }
}

variable "maximum_instance_count" {
  description = "The most instances the app scales out to (1-1000)."
  type        = number
  default     = 100
  nullable    = false

  validation {
    condition     = var.maximum_instance_count >= 1 && var.maximum_instance_count <= 1000 && floor(var.maximum_instance_count) == var.maximum_instance_count
    error_message = "The maximum_instance_count value must be a whole number from 1 to 1000."
  }
}

variable "function_timeout" {
  description = "The Functions host's functionTimeout in whole seconds, written as AzureFunctionsJobHost__functionTimeout (it overrides host.json). HTTP invocations are further capped at 230 s by the platform's load balancer, which the gateway counts from 30 s before it sees the request: 200 s. At most 3600: Flex Consumption enforces no maximum, but it guarantees an execution only 60 minutes at scale-in."
  type        = number
  default     = 1800
  nullable    = false

  validation {
    condition     = var.function_timeout >= 1 && var.function_timeout <= 3600 && floor(var.function_timeout) == var.function_timeout
    error_message = "The function_timeout value must be a whole number of seconds from 1 to 3600."
  }
}

variable "result_containers" {
  description = "Extra blob containers for async results. The gateway's own (gateway, gateway-results) and every async-config.containername of a JSON user_profiles are always created; list here those of a file:<path> user_profiles."
  type        = list(string)
  default     = []
  nullable    = false

  validation {
    condition     = alltrue([for c in var.result_containers : can(regex("^[a-z0-9](-?[a-z0-9])+$", c)) && length(c) <= 63])
    error_message = "The result_containers value must list container names of 3-63 lowercase letters, digits and single hyphens."
  }
}

variable "notification_topics" {
  description = "Extra storage queues for lifecycle notifications. Every async-config.topic of a JSON user_profiles is always created; list here those of a file:<path> user_profiles. The function only sends to these queues: it creates none."
  type        = list(string)
  default     = []
  nullable    = false

  validation {
    condition     = alltrue([for q in var.notification_topics : can(regex("^[a-z0-9](-?[a-z0-9])+$", q)) && length(q) <= 63])
    error_message = "The notification_topics value must list queue names of 3-63 lowercase letters, digits and single hyphens."
  }
}

# The front door: what stands between the internet and the gateway (whose
# managed identity signs the routes with auth). docs/security.md, "The front
# door of each cloud".

variable "authentication" {
  description = "What stands in front of the gateway. function_keys (default): the Functions host answers 401 to a request without a key of the app (x-functions-key header or code query parameter), as the package's authLevel function says. entra: App Service Authentication with Microsoft Entra ID answers 401 to a request without a valid token for entra_client_id, and the key is still wanted. none: nothing; anyone on the internet can call the gateway, and the package must be built with make package-azure AZURE_AUTH_LEVEL=anonymous (the package_auth_level output)."
  type        = string
  default     = "function_keys"
  nullable    = false

  validation {
    condition     = contains(["function_keys", "entra", "none"], var.authentication)
    error_message = "The authentication value must be function_keys, entra or none (none leaves the gateway open to anyone: say so explicitly)."
  }
}

variable "entra_client_id" {
  description = "With authentication = entra: the application (client) ID of the app registration that stands for the gateway (an API with an App ID URI such as api://<client-id>). Callers get tokens for it (scope api://<client-id>/.default). The module does not create it: az ad app create, or your directory's admin."
  type        = string
  default     = null

  validation {
    condition     = var.entra_client_id == null || can(regex("^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$", coalesce(var.entra_client_id, "-")))
    error_message = "The entra_client_id value must be an application (client) ID, a GUID such as 00000000-0000-0000-0000-000000000000."
  }
  validation {
    condition     = var.authentication != "entra" || var.entra_client_id != null
    error_message = "authentication = entra needs entra_client_id: the app registration whose tokens App Service Authentication accepts."
  }
  validation {
    condition     = var.authentication == "entra" || var.entra_client_id == null
    error_message = "entra_client_id is set but authentication is not entra: it would be ignored; set authentication = \"entra\" or leave entra_client_id out."
  }
}

variable "entra_tenant_id" {
  description = "With authentication = entra: the Microsoft Entra tenant (directory) ID that issues the tokens. null: the tenant Terraform signs in to."
  type        = string
  default     = null

  validation {
    condition     = var.entra_tenant_id == null || can(regex("^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$", coalesce(var.entra_tenant_id, "-")))
    error_message = "The entra_tenant_id value must be a tenant ID, a GUID, or null."
  }
}

variable "entra_allowed_applications" {
  description = "With authentication = entra: the client IDs of the applications whose tokens are accepted (the token's appid or azp claim), such as a caller's managed identity or service principal. []: any application that can get a token for entra_client_id (restrict who can with the registration's assignment required, and app roles)."
  type        = list(string)
  default     = []
  nullable    = false

  validation {
    condition     = alltrue([for id in var.entra_allowed_applications : can(regex("^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$", id))])
    error_message = "The entra_allowed_applications value must list client IDs (GUIDs)."
  }
  validation {
    condition     = var.authentication == "entra" || length(var.entra_allowed_applications) == 0
    error_message = "entra_allowed_applications is set but authentication is not entra: it would be ignored."
  }
}

variable "log_retention_days" {
  description = "Retention of the Application Insights data, in days."
  type        = number
  default     = 30
  nullable    = false

  validation {
    condition     = contains([30, 60, 90, 120, 180, 270, 365, 550, 730], var.log_retention_days)
    error_message = "The log_retention_days value must be one of 30, 60, 90, 120, 180, 270, 365, 550, 730."
  }
}

# --- monitoring (monitoring.tf; docs/operations.md) ---------------------------

variable "alarms" {
  description = "The alerts' recipient and thresholds (docs/operations.md#alarms-and-alerts-what-each-means-what-to-do), each over 5 minutes unless said: email, an address the alerts' action group notifies (null: no receiver; add one in the portal); dead_letters, continuations the host moved to the poison queue (its \"Moving message to queue\" line; 0: any); continuation_age_secs, the longest a continuation may have waited when its invocation receives it (the line's queueAgeMs; null: a quarter of async_ttl_secs, at most 900); queue_messages, the most messages in the storage account's queues (QueueMessageCount, all queues, hourly; over 6 hours); function_limit_endings, requests ended 504 FunctionLimit; function_errors, invocations the function failed; throttles, invocations the platform itself answered 429; error_rate_percent, requests answered 5xx; deadline_rate_percent, requests ended 504 TTLExpired or AttemptTimeout; backend_unavailable_rate_percent, requests ended 502 BackendUnavailable (each by route); async_unavailable_percent, async hand-offs refused 503 AsyncUnavailable; rate_min_requests, the fewest requests (hand-offs) of a route in a period for a rate to count; latency_p99_ms, a route's p99 request duration (null: half of default_ttl_secs). Events, rates and latency alert when over in 3 of 5 periods."
  # One object, the same in both modules: its attributes' defaults are the
  # alarm defaults of terraform/monitoring/panels.json (TestAlarmDefaults).
  type = object({
    email                  = optional(string)
    dead_letters           = optional(number, 0)
    continuation_age_secs  = optional(number)
    queue_messages         = optional(number, 1000)
    function_limit_endings = optional(number, 0)
    function_errors        = optional(number, 0)
    throttles              = optional(number, 0)
    # Rates, in % of the requests of a 5-minute period with at least
    # rate_min_requests of them; over 3 of 5 periods.
    error_rate_percent               = optional(number, 5)
    deadline_rate_percent            = optional(number, 5)
    backend_unavailable_rate_percent = optional(number, 5)
    async_unavailable_percent        = optional(number, 5)
    rate_min_requests                = optional(number, 20)
    latency_p99_ms                   = optional(number)
  })
  default  = {}
  nullable = false

  validation {
    condition     = var.alarms.email == null || can(regex("^[^@\\s]+@[^@\\s]+$", coalesce(var.alarms.email, "-")))
    error_message = "The alarms.email value must be an e-mail address, or null."
  }
  validation {
    condition     = alltrue([for k in ["dead_letters", "queue_messages", "function_limit_endings", "function_errors", "throttles", "error_rate_percent", "deadline_rate_percent", "backend_unavailable_rate_percent", "async_unavailable_percent", "rate_min_requests"] : var.alarms[k] != null && var.alarms[k] >= 0]) && (var.alarms.continuation_age_secs == null || coalesce(var.alarms.continuation_age_secs, 0) > 0) && (var.alarms.latency_p99_ms == null || coalesce(var.alarms.latency_p99_ms, 0) > 0)
    error_message = "The alarms thresholds must be 0 or more (continuation_age_secs and latency_p99_ms more than 0, or null)."
  }
}

variable "tags" {
  description = "Tags for every resource."
  type        = map(string)
  default     = {}
  nullable    = false
}

# ---------------------------------------------------------------------------
# Gateway settings (docs/settings.md#settings). Each variable is one app setting; its
# default is the gateway's own (settings.Settings), null where the gateway has
# none. Only values that differ from the gateway's default are written, so the
# gateway applies its own defaults and holds only what you set against the
# execution limit.
# ---------------------------------------------------------------------------

variable "hosts" {
  description = "Hosts: the backends of the default route, tried in this order; base URLs http(s)://host[:port][/path]. Required."
  type        = list(string)
  nullable    = false

  validation {
    condition     = length(var.hosts) > 0 && alltrue([for h in var.hosts : can(regex("^https?://[^/?#@]+(/[^?#]*)?$", h))])
    error_message = "The hosts value must be one or more base URLs of the form http(s)://host[:port][/path], without user info, query or fragment."
  }
}

variable "routes" {
  description = "Routes: per-path-prefix overrides of the default route, written as the JSON array the gateway reads (ttlSecs in s, the *Ms fields in ms). null: none."
  type = list(object({
    prefix             = string
    hosts              = optional(list(string))
    ttlSecs            = optional(number)
    timeoutMs          = optional(number)
    maxAttempts        = optional(number)
    stream             = optional(bool)
    firstByteTimeoutMs = optional(number)
    idleTimeoutMs      = optional(number)
    async              = optional(bool)
    # Upstream policy (docs/settings.md, "Upstream policy per route").
    hedgeOnPerTryTimeout = optional(bool)
    ejectAfterFailures   = optional(number)
    ejectForMs           = optional(number)
    auth = optional(object({
      type                      = string
      scope                     = optional(string)
      service                   = optional(string)
      region                    = optional(string)
      clientAuthorizationHeader = optional(string)
    }))
  }))
  default = null

  validation {
    condition     = var.routes == null || alltrue([for r in coalesce(var.routes, []) : startswith(r.prefix, "/")])
    error_message = "The routes value must give every route a prefix starting with /."
  }
}

variable "default_ttl_secs" {
  description = "DefaultTTLSecs: the whole-request budget in seconds (decimals allowed), arrival to final response headers, every attempt included."
  type        = number
  default     = 300
  nullable    = false

  validation {
    condition     = var.default_ttl_secs > 0
    error_message = "The default_ttl_secs value must be a positive number of seconds."
  }
}

variable "timeout" {
  description = "Timeout: one attempt's window in milliseconds, fresh for every attempt. Changed from its default, it must fit the execution limit less function_limit_margin_ms."
  type        = number
  default     = 1200000
  nullable    = false

  validation {
    condition     = var.timeout > 0 && floor(var.timeout) == var.timeout
    error_message = "The timeout value must be a positive whole number of milliseconds."
  }
}

variable "max_attempts" {
  description = "MaxAttempts: attempts per request, cycling through the route's hosts; 1 means no retry. null: one per host."
  type        = number
  default     = null

  validation {
    condition     = var.max_attempts == null || (coalesce(var.max_attempts, 1) > 0 && floor(coalesce(var.max_attempts, 1)) == coalesce(var.max_attempts, 1))
    error_message = "The max_attempts value must be a positive whole number, or null."
  }
}

variable "retry_backoff_ms" {
  description = "RetryBackoffMs: base of the jittered exponential wait between attempts, in milliseconds (capped at 10 times the base)."
  type        = number
  default     = 25
  nullable    = false

  validation {
    condition     = var.retry_backoff_ms > 0 && floor(var.retry_backoff_ms) == var.retry_backoff_ms
    error_message = "The retry_backoff_ms value must be a positive whole number of milliseconds."
  }
}

variable "max_retry_body_bytes" {
  description = "MaxRetryBodyBytes: the largest request body, in bytes, buffered so it can be resent; a larger body streams to a single attempt."
  type        = number
  default     = 10485760
  nullable    = false

  validation {
    condition     = var.max_retry_body_bytes > 0 && floor(var.max_retry_body_bytes) == var.max_retry_body_bytes
    error_message = "The max_retry_body_bytes value must be a positive whole number of bytes."
  }
}

variable "max_buffered_bytes" {
  description = "MaxBufferedBytes: the process-wide budget, in bytes, for buffered request bodies; a body that does not fit streams to a single attempt."
  type        = number
  default     = 134217728
  nullable    = false

  validation {
    condition     = var.max_buffered_bytes > 0 && floor(var.max_buffered_bytes) == var.max_buffered_bytes
    error_message = "The max_buffered_bytes value must be a positive whole number of bytes."
  }
}

variable "client_body_timeout_ms" {
  description = "ClientBodyTimeoutMs: the longest silence, in milliseconds, between two reads of a request body before 408 RequestTimeout."
  type        = number
  default     = 30000
  nullable    = false

  validation {
    condition     = var.client_body_timeout_ms > 0 && floor(var.client_body_timeout_ms) == var.client_body_timeout_ms
    error_message = "The client_body_timeout_ms value must be a positive whole number of milliseconds."
  }
}

variable "function_limit_margin_ms" {
  description = "FunctionLimitMarginMs: milliseconds kept free before the execution limit, to answer or hand off to async before the platform stops the invocation."
  type        = number
  default     = 1000
  nullable    = false

  validation {
    condition     = var.function_limit_margin_ms > 0 && floor(var.function_limit_margin_ms) == var.function_limit_margin_ms
    error_message = "The function_limit_margin_ms value must be a positive whole number of milliseconds."
  }
}

variable "async_mode_enabled" {
  description = "AsyncModeEnabled: the gateway-level async switch (a request also needs its profile's async-config.enabled and S7PAsyncMode: true)."
  type        = bool
  default     = false
  nullable    = false
}

variable "async_trigger_timeout" {
  description = "AsyncTriggerTimeout: milliseconds without a response after which an async-eligible request is answered 202. Changed from its default with async on, it must fit the execution limit less function_limit_margin_ms."
  type        = number
  default     = 10000
  nullable    = false

  validation {
    condition     = var.async_trigger_timeout > 0 && floor(var.async_trigger_timeout) == var.async_trigger_timeout
    error_message = "The async_trigger_timeout value must be a positive whole number of milliseconds."
  }
}

variable "async_timeout" {
  description = "AsyncTimeout: one attempt's window in milliseconds once a request is async (replaces Timeout); an attempt longer than one invocation is checkpointed and continued in the next."
  type        = number
  default     = 1800000
  nullable    = false

  validation {
    condition     = var.async_timeout > 0 && floor(var.async_timeout) == var.async_timeout
    error_message = "The async_timeout value must be a positive whole number of milliseconds."
  }
}

variable "async_ttl_secs" {
  description = "AsyncTTLSecs: an async request's expiry in seconds from arrival, also the lifetime of its result URIs; the stored results are deleted after it (in whole days, rounded up)."
  type        = number
  default     = 86400
  nullable    = false

  validation {
    condition     = var.async_ttl_secs > 0
    error_message = "The async_ttl_secs value must be a positive number of seconds."
  }
  validation {
    condition     = !var.async_mode_enabled || var.async_ttl_secs * 1000 >= var.async_trigger_timeout
    error_message = "The async_ttl_secs value must be at least async_trigger_timeout (in seconds) when async is on, or nothing could ever go async."
  }
}

variable "user_profiles" {
  description = "UserProfiles: the JSON array of profiles keyed by userId (async-config: enabled, containername, topic), or file:<path> of one. null: none."
  type        = string
  default     = null

  validation {
    condition     = var.user_profiles == null || startswith(coalesce(var.user_profiles, "file:"), "file:") || (startswith(trimspace(coalesce(var.user_profiles, "[]")), "[") && can(jsondecode(coalesce(var.user_profiles, "[]"))))
    error_message = "The user_profiles value must be a JSON array of profiles or file:<path>."
  }
}

variable "function_timeout_secs" {
  description = "FunctionTimeoutSecs: the execution limit, in seconds, to stay inside. null (recommended): the host's own, which the gateway reads from the platform."
  type        = number
  default     = null

  validation {
    condition     = var.function_timeout_secs == null || coalesce(var.function_timeout_secs, 1) > 0
    error_message = "The function_timeout_secs value must be a positive number of seconds, or null."
  }
}

variable "public_base_url" {
  description = "PublicBaseURL: the public base of status URIs and gateway-served result URLs (behind a custom domain, CDN or API Management). null: built from the request's Host and scheme."
  type        = string
  default     = null

  validation {
    condition     = var.public_base_url == null || can(regex("^https?://[^/?#@]+(/[^?#]*)?$", coalesce(var.public_base_url, "http://x")))
    error_message = "The public_base_url value must be an http(s) URL without query or fragment, or null."
  }
}

variable "max_continuations" {
  description = "MaxContinuations: continuations one instance works on at once, in-process finishes after a 202 included; beyond it they wait on the queue."
  type        = number
  default     = 16
  nullable    = false

  validation {
    condition     = var.max_continuations > 0 && floor(var.max_continuations) == var.max_continuations
    error_message = "The max_continuations value must be a positive whole number."
  }
}

variable "retry_budget_percent" {
  description = "RetryBudgetPercent: retries and hedges in flight on an instance stay under max(RetryBudgetMinConcurrency, this percent of the requests in flight)."
  type        = number
  default     = 20
  nullable    = false

  validation {
    condition     = var.retry_budget_percent >= 1 && var.retry_budget_percent <= 100 && floor(var.retry_budget_percent) == var.retry_budget_percent
    error_message = "The retry_budget_percent value must be a whole number from 1 to 100."
  }
}

variable "retry_budget_min_concurrency" {
  description = "RetryBudgetMinConcurrency: the retries always allowed in flight on an instance, however few the requests."
  type        = number
  default     = 3
  nullable    = false

  validation {
    condition     = var.retry_budget_min_concurrency > 0 && floor(var.retry_budget_min_concurrency) == var.retry_budget_min_concurrency
    error_message = "The retry_budget_min_concurrency value must be a positive whole number."
  }
}

variable "async_inline_result_bytes" {
  description = "AsyncInlineResultBytes: a finished async result up to this size is answered by the status URI itself; a larger successful one is answered 303 to its signed data URL. At most 4194304."
  type        = number
  default     = 1048576
  nullable    = false

  validation {
    condition     = var.async_inline_result_bytes > 0 && var.async_inline_result_bytes <= 4194304 && floor(var.async_inline_result_bytes) == var.async_inline_result_bytes
    error_message = "The async_inline_result_bytes value must be a whole number from 1 to 4194304."
  }
}

variable "max_continuations_per_profile" {
  description = "MaxContinuationsPerProfile: continuation slots one profile may hold on an instance; null means the gateway's default, half of max_continuations rounded up."
  type        = number
  default     = null

  validation {
    condition     = var.max_continuations_per_profile == null || try(var.max_continuations_per_profile > 0 && floor(var.max_continuations_per_profile) == var.max_continuations_per_profile, false)
    error_message = "The max_continuations_per_profile value must be a positive whole number, or null."
  }
}

variable "idempotency_scope_headers" {
  description = "IdempotencyScopeHeaders: the request headers whose values (hashed) scope an Idempotency-Key, with the profile and the caller identity the platform verified."
  type        = list(string)
  default     = ["Authorization"]
  nullable    = false

  validation {
    condition     = length(var.idempotency_scope_headers) > 0 && alltrue([for h in var.idempotency_scope_headers : can(regex("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$", h))])
    error_message = "The idempotency_scope_headers value must be a non-empty list of header names."
  }
}

variable "gateway_endpoint_log_level" {
  description = "GatewayEndpointLogLevel: the level of the log line of each request to the gateway's own endpoints (status and operation URIs, stats, result reads): debug, info, warn or error. The gateway writes info and above, so debug silences them (a busy poller otherwise fills the log)."
  type        = string
  default     = "info"
  nullable    = false

  validation {
    condition     = contains(["debug", "info", "warn", "error"], var.gateway_endpoint_log_level)
    error_message = "The gateway_endpoint_log_level value must be debug, info, warn or error."
  }
}

variable "trusted_proxies" {
  description = "TrustedProxies: CIDRs of proxies in front of the platform's own front end (API Management, a CDN) whose X-Forwarded-*, Forwarded and X-Request-Start headers are believed; the platform's front end is trusted without it."
  type        = list(string)
  default     = []
  nullable    = false

  validation {
    condition     = alltrue([for c in var.trusted_proxies : can(cidrhost(c, 0))])
    error_message = "The trusted_proxies value must be a list of CIDRs such as 203.0.113.0/24."
  }
}

variable "otel_exporter_otlp_endpoint" {
  description = "OTEL_EXPORTER_OTLP_ENDPOINT: the OTLP/HTTP receiver the gateway exports traces and metrics to (https://collector.example.com:4318); null exports nothing."
  type        = string
  default     = null

  validation {
    condition     = var.otel_exporter_otlp_endpoint == null || can(regex("^https?://[^\\s]+$", var.otel_exporter_otlp_endpoint))
    error_message = "The otel_exporter_otlp_endpoint value must be an http:// or https:// URL, or null."
  }
}

variable "otel_exporter_otlp_headers" {
  description = "OTEL_EXPORTER_OTLP_HEADERS: headers sent to the OTLP receiver (key1=value1,key2=value2), such as an API key; null sends none."
  type        = string
  default     = null
  sensitive   = true
}

# ---------------------------------------------------------------------------
# WARM settings, reloaded without a restart (docs/settings.md#reloading-settings-warm-and-cold)
# ---------------------------------------------------------------------------

variable "warm_settings" {
  description = "WARM settings (the Reload column of docs/settings.md) kept in an Azure App Configuration store instead of app settings, keyed by setting name, each value as the environment writes it: { DefaultTTLSecs = \"60\" }. Written as the keys Warm:<name> and the sentinel Warm:Sentinel (a hash of the map), read by the app with its managed identity (SettingsSource = the store's endpoint): changing them changes no app setting and restarts nothing. A value here overrides the app setting of the same name. null: no store, no SettingsSource."
  type        = map(string)
  default     = null

  validation {
    condition     = var.warm_settings == null || alltrue([for k, v in coalesce(var.warm_settings, {}) : can(regex("^[A-Z][A-Za-z0-9]*$", k)) && k != "Sentinel" && !startswith(k, "Settings")])
    error_message = "The warm_settings keys must be the gateway's setting names (DefaultTTLSecs, Routes, …): not Sentinel (the module writes it) nor a Settings* setting (environment only)."
  }
}

variable "app_configuration_id" {
  description = "With warm_settings: the resource id of an existing App Configuration store to write the keys to (the deployer needs App Configuration Data Owner on it; SettingsSource is https://<store name>.azconfig.io). null: the module creates the store <name>-settings and grants the deployer App Configuration Data Owner on it."
  type        = string
  default     = null

  validation {
    condition     = var.app_configuration_id == null || can(regex("^/subscriptions/[^/]+/resourceGroups/[^/]+/providers/Microsoft.AppConfiguration/configurationStores/[A-Za-z0-9-]{5,50}$", coalesce(var.app_configuration_id, "x")))
    error_message = "The app_configuration_id value must be a store's resource id, /subscriptions/<id>/resourceGroups/<group>/providers/Microsoft.AppConfiguration/configurationStores/<name>."
  }
}

variable "app_configuration_sku" {
  # The free tier allows 1,000 requests a day per store ("Azure App
  # Configuration pricing"): one instance polling the sentinel every 30 s
  # makes 2,880.
  description = "The SKU of the App Configuration store the module creates: standard (default), premium, developer or free (1,000 requests a day: less than one instance polling every 30 s)."
  type        = string
  default     = "standard"
  nullable    = false

  validation {
    condition     = contains(["free", "developer", "standard", "premium"], var.app_configuration_sku)
    error_message = "The app_configuration_sku value must be free, developer, standard or premium."
  }
}

variable "settings_label" {
  description = "SettingsLabel: the label of the App Configuration keys the module writes and the gateway reads; null: no label."
  type        = string
  default     = null
}

variable "settings_refresh_secs" {
  description = "SettingsRefreshSecs: how often each instance polls the sentinel (one conditional read when nothing changed), whole seconds from 1 to 86400."
  type        = number
  default     = 30
  nullable    = false

  validation {
    condition     = var.settings_refresh_secs >= 1 && var.settings_refresh_secs <= 86400 && floor(var.settings_refresh_secs) == var.settings_refresh_secs
    error_message = "The settings_refresh_secs value must be whole seconds from 1 to 86400."
  }
}

variable "settings_source_optional" {
  description = "SettingsSourceOptional: true starts an instance on its app settings when the store cannot be read (logged and counted) instead of failing its start-up."
  type        = bool
  default     = false
  nullable    = false
}

# --- host selection, retried statuses, answers, polling (docs/settings.md) ---

variable "load_balance_mode" {
  description = "LoadBalanceMode: the order a request tries its route's hosts in: priority (the list's order, failover), latency (lowest recent latency first), roundrobin or random; a route's loadBalance overrides it."
  type        = string
  default     = "priority"
  nullable    = false

  validation {
    condition     = contains(["priority", "latency", "roundrobin", "random"], var.load_balance_mode)
    error_message = "The load_balance_mode value must be priority, latency, roundrobin or random."
  }
}

variable "retry_on_status_codes" {
  description = "RetryOnStatusCodes: the backend statuses that move on to the next host (each from 400 to 599); every other status goes to the client. A route's retryOn overrides it."
  type        = list(number)
  default     = [429, 502, 503, 504]
  nullable    = false

  validation {
    condition     = length(var.retry_on_status_codes) > 0 && alltrue([for c in var.retry_on_status_codes : c >= 400 && c <= 599 && floor(c) == c])
    error_message = "The retry_on_status_codes value must be a non-empty list of whole numbers from 400 to 599."
  }
}

variable "async_predict_window" {
  description = "AsyncPredictWindow: predictive hand-off, on when set: the last this many async-eligible requests of each route are remembered, and while more than a tenth of them outlasted AsyncTriggerTimeout the next ones are handed off at once. null: off."
  type        = number
  default     = null

  validation {
    condition     = var.async_predict_window == null ? true : var.async_predict_window > 0 && floor(var.async_predict_window) == var.async_predict_window
    error_message = "The async_predict_window value must be a positive whole number, or null."
  }
}

variable "max_response_header_bytes" {
  description = "MaxResponseHeaderBytes: the largest header section of a backend's answer the gateway reads; a larger one fails its attempt (502 BackendUnavailable once the attempts are spent)."
  type        = number
  default     = 1048576
  nullable    = false

  validation {
    condition     = var.max_response_header_bytes > 0 && floor(var.max_response_header_bytes) == var.max_response_header_bytes
    error_message = "The max_response_header_bytes value must be a positive whole number."
  }
}

variable "async_poll_max_secs" {
  description = "AsyncPollMaxSecs: the longest Retry-After of a pending async request's status; the interval starts at 2 s and grows with the request's age up to this."
  type        = number
  default     = 30
  nullable    = false

  validation {
    condition     = var.async_poll_max_secs > 0 && floor(var.async_poll_max_secs) == var.async_poll_max_secs
    error_message = "The async_poll_max_secs value must be a positive whole number."
  }
}
