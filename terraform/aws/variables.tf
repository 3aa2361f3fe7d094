# ---------------------------------------------------------------------------
# Platform
# ---------------------------------------------------------------------------

variable "name" {
  description = "Base name of the resources: the function, its role (<name>-gateway), log group and queues (<name>-continuations, <name>-continuations-dlq). 1-40 letters, digits, hyphens and underscores, starting and ending with a letter or digit (the results bucket's name starts with it, and an S3 bucket name must start and end with one). Unique per account and region; the bucket's name gets a generated suffix."
  type        = string
  nullable    = false

  # 40 keeps every derived name inside its limit: the role (64), the queues
  # (80 with -continuations-dlq) and the function (64).
  validation {
    condition     = can(regex("^[A-Za-z0-9]([A-Za-z0-9_-]{0,38}[A-Za-z0-9])?$", var.name))
    error_message = "The name value must be 1-40 letters, digits, hyphens and underscores, starting and ending with a letter or digit."
  }
}

variable "package_path" {
  description = "Path of the deployment zip with the bootstrap binary, as make package-aws builds it (dist/aws-lambda.zip)."
  type        = string
  nullable    = false
}

# The one default of the Lambda architecture: the Makefile's package-aws reads
# it from here (GOARCH_LAMBDA), the example leaves it to this default, and
# terraform/ TestLambdaArchitecture holds the zip's ELF header against it.
variable "architecture" {
  description = "The function's instruction set: arm64 or x86_64. The zip's bootstrap must be built for it: make package-aws builds for this variable's default; for x86_64, build with make package-aws GOARCH_LAMBDA=amd64."
  type        = string
  default     = "arm64"
  nullable    = false

  validation {
    condition     = contains(["arm64", "x86_64"], var.architecture)
    error_message = "The architecture value must be arm64 or x86_64."
  }
}

variable "lambda_timeout" {
  description = "The function's timeout in whole seconds (1-900): the execution limit every gateway budget stays inside."
  type        = number
  default     = 60
  nullable    = false

  validation {
    condition     = var.lambda_timeout >= 1 && var.lambda_timeout <= 900 && floor(var.lambda_timeout) == var.lambda_timeout
    error_message = "The lambda_timeout value must be a whole number of seconds from 1 to 900."
  }
}

variable "memory_size" {
  description = "The function's memory in MB (128-10240)."
  type        = number
  default     = 512
  nullable    = false

  validation {
    condition     = var.memory_size >= 128 && var.memory_size <= 10240 && floor(var.memory_size) == var.memory_size
    error_message = "The memory_size value must be a whole number of MB from 128 to 10240."
  }
}

variable "function_url_auth_type" {
  description = "The Function URL's authorization: AWS_IAM (callers sign with SigV4) or NONE (public)."
  type        = string
  default     = "AWS_IAM"
  nullable    = false

  validation {
    condition     = contains(["AWS_IAM", "NONE"], var.function_url_auth_type)
    error_message = "The function_url_auth_type value must be AWS_IAM or NONE."
  }
}

variable "invoke_mode" {
  description = "InvokeMode: the Function URL's invoke mode, BUFFERED or RESPONSE_STREAM; also written as the gateway's InvokeMode setting so the function answers in the form Lambda expects."
  type        = string
  default     = "BUFFERED"
  nullable    = false

  validation {
    condition     = contains(["BUFFERED", "RESPONSE_STREAM"], var.invoke_mode)
    error_message = "The invoke_mode value must be BUFFERED or RESPONSE_STREAM."
  }
}

variable "reserved_concurrent_executions" {
  description = "Reserved concurrency of the function: its ceiling of concurrent invocations (Function URL and queue together), taken from the account's unreserved pool. null: unreserved, the function shares the account's pool (reserving needs an account whose quota leaves 100 unreserved)."
  type        = number
  default     = null

  validation {
    condition     = var.reserved_concurrent_executions == null || (coalesce(var.reserved_concurrent_executions, 0) >= 1 && floor(coalesce(var.reserved_concurrent_executions, 0)) == coalesce(var.reserved_concurrent_executions, 0))
    error_message = "The reserved_concurrent_executions value must be a positive whole number, or null."
  }
}

variable "continuation_max_concurrency" {
  description = "The most concurrent invocations the SQS event source mapping makes for continuations (2-1000): async work waits on the queue beyond it, leaving the rest of the concurrency to requests."
  type        = number
  default     = 10
  nullable    = false

  validation {
    condition     = var.continuation_max_concurrency >= 2 && var.continuation_max_concurrency <= 1000 && floor(var.continuation_max_concurrency) == var.continuation_max_concurrency
    error_message = "The continuation_max_concurrency value must be a whole number from 2 to 1000."
  }
}

variable "bucket_name" {
  description = "The S3 bucket for async records and results (globally unique). null: a name generated from name."
  type        = string
  default     = null

  validation {
    condition     = var.bucket_name == null || can(regex("^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$", coalesce(var.bucket_name, "abc")))
    error_message = "The bucket_name value must be 3-63 lowercase letters, digits, dots and hyphens."
  }
}

variable "queue_visibility_timeout_secs" {
  description = "The continuation queue's visibility timeout in seconds. null: 6 times lambda_timeout, as AWS advises for a queue feeding a function; a value must be at least that."
  type        = number
  default     = null

  validation {
    condition     = var.queue_visibility_timeout_secs == null || (coalesce(var.queue_visibility_timeout_secs, 0) >= 6 * var.lambda_timeout && coalesce(var.queue_visibility_timeout_secs, 0) <= 43200)
    error_message = "The queue_visibility_timeout_secs value must be from 6 times lambda_timeout to 43200 seconds."
  }
}

variable "max_receive_count" {
  description = "Deliveries of one continuation message before SQS moves it to the dead-letter queue."
  type        = number
  default     = 5
  nullable    = false

  validation {
    condition     = var.max_receive_count >= 1 && var.max_receive_count <= 1000 && floor(var.max_receive_count) == var.max_receive_count
    error_message = "The max_receive_count value must be a whole number from 1 to 1000."
  }
}

variable "batch_size" {
  description = "Continuation messages per SQS invocation (1-10); each one runs under the same invocation deadline."
  type        = number
  default     = 1
  nullable    = false

  validation {
    condition     = var.batch_size >= 1 && var.batch_size <= 10 && floor(var.batch_size) == var.batch_size
    error_message = "The batch_size value must be a whole number from 1 to 10."
  }
}

variable "notification_topics" {
  description = "Extra SNS FIFO topics for lifecycle notifications (names ending in .fifo). Every async-config.topic of a JSON user_profiles is always created; list here those of a file:<path> user_profiles. The function may only publish to these topics: it creates none."
  type        = list(string)
  default     = []
  nullable    = false

  validation {
    condition     = alltrue([for t in var.notification_topics : can(regex("^[A-Za-z0-9_-]{1,251}[.]fifo$", t))])
    error_message = "The notification_topics value must list SNS FIFO topic names: 1-256 letters, digits, hyphens and underscores, ending in .fifo."
  }
}

variable "log_retention_days" {
  description = "Retention of the function's CloudWatch log group, in days."
  type        = number
  default     = 30
  nullable    = false

  validation {
    condition     = contains([1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653], var.log_retention_days)
    error_message = "The log_retention_days value must be one CloudWatch Logs accepts (1, 3, 5, 7, 14, 30, 60, 90, ... 3653)."
  }
}

# --- monitoring (monitoring.tf; docs/operations.md) ---------------------------

variable "alarms" {
  description = "The alarms' recipient and thresholds (docs/operations.md#alarms-and-alerts-what-each-means-what-to-do), over 5-minute periods: email, an address the alarms notify through an SNS topic the module creates (it must confirm the subscription; null: no topic, the alarms notify nobody); dead_letters, the most messages in the continuations' dead-letter queue (ApproximateNumberOfMessagesVisible; 0: any); continuation_age_secs, the longest the oldest continuation may wait (ApproximateAgeOfOldestMessage; null: a quarter of async_ttl_secs, at most 900); function_limit_endings, requests ended 504 FunctionLimit (needs emf_namespace); function_errors, invocations the function failed; throttles, invocations refused for want of concurrency; error_rate_percent, requests answered 5xx (status_5xx / requests); deadline_rate_percent, requests ended 504 TTLExpired or AttemptTimeout; backend_unavailable_rate_percent, requests ended 502 BackendUnavailable; async_unavailable_percent, async hand-offs refused 503 AsyncUnavailable; rate_min_requests, the fewest requests (hand-offs) in a period for a rate to count; latency_p99_ms, the p99 request duration (null: half of default_ttl_secs). Events, rates and latency alarm when over in 3 of 5 periods; dead_letters and continuation_age_secs in one (needs emf_namespace for the gateway's own metrics)."
  # One object, the same in both modules: its attributes' defaults are the
  # alarm defaults of terraform/monitoring/panels.json (TestAlarmDefaults).
  type = object({
    email                  = optional(string)
    dead_letters           = optional(number, 0)
    continuation_age_secs  = optional(number)
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
    condition     = alltrue([for k in ["dead_letters", "function_limit_endings", "function_errors", "throttles", "error_rate_percent", "deadline_rate_percent", "backend_unavailable_rate_percent", "async_unavailable_percent", "rate_min_requests"] : var.alarms[k] != null && var.alarms[k] >= 0]) && (var.alarms.continuation_age_secs == null || coalesce(var.alarms.continuation_age_secs, 0) > 0) && (var.alarms.latency_p99_ms == null || coalesce(var.alarms.latency_p99_ms, 0) > 0)
    error_message = "The alarms thresholds must be 0 or more (continuation_age_secs and latency_p99_ms more than 0, or null)."
  }
}

variable "s3_request_metrics" {
  description = "Turn on S3 request metrics for the results bucket (billed as CloudWatch custom metrics), for the dashboard's S3 requests per async request."
  type        = bool
  default     = true
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

variable "emf_namespace" {
  description = "EmfNamespace: the CloudWatch namespace of the Embedded Metric Format metrics in the per-request log line (CloudWatch custom metrics, billed per metric; null turns them off)."
  type        = string
  default     = "FnGateway"

  validation {
    condition     = var.emf_namespace == null || can(regex("^[0-9A-Za-z.\\-_/#:]{1,255}$", var.emf_namespace))
    error_message = "The emf_namespace value must be a CloudWatch namespace (1-255 letters, digits and . - _ / # :), or null."
  }
}

# ---------------------------------------------------------------------------
# WARM settings, reloaded without a restart (docs/settings.md#reloading-settings-warm-and-cold)
# ---------------------------------------------------------------------------

variable "warm_settings" {
  description = "WARM settings (the Reload column of docs/settings.md) kept in a settings document in S3 instead of the function's environment, keyed by setting name, each value as the environment writes it: { DefaultTTLSecs = \"60\" }. Written as the JSON object s3://<name>-warm-*/settings.json, which the function polls (SettingsSource, conditional GET on its ETag): changing them changes no environment variable and restarts nothing. A value here overrides the variable of the same name. null: no document, no SettingsSource."
  type        = map(string)
  default     = null

  validation {
    condition     = var.warm_settings == null || alltrue([for k, v in coalesce(var.warm_settings, {}) : can(regex("^[A-Z][A-Za-z0-9]*$", k)) && !startswith(k, "Settings")])
    error_message = "The warm_settings keys must be the gateway's setting names (DefaultTTLSecs, Routes, …), not a Settings* setting (environment only)."
  }
}

variable "settings_refresh_secs" {
  description = "SettingsRefreshSecs: how often each execution environment polls the settings document (one conditional GET when nothing changed), whole seconds from 1 to 86400."
  type        = number
  default     = 30
  nullable    = false

  validation {
    condition     = var.settings_refresh_secs >= 1 && var.settings_refresh_secs <= 86400 && floor(var.settings_refresh_secs) == var.settings_refresh_secs
    error_message = "The settings_refresh_secs value must be whole seconds from 1 to 86400."
  }
}

variable "settings_source_optional" {
  description = "SettingsSourceOptional: true starts an execution environment on its environment's settings when the document cannot be read (logged and counted) instead of failing its start-up."
  type        = bool
  default     = false
  nullable    = false
}

variable "warm_settings_source" {
  description = "Where warm_settings live: s3 (default: a settings document in a bucket of its own, read with a conditional GET) or appconfig (an AWS AppConfig hosted configuration, deployed with AppConfig.AllAtOnce and read through the AppConfig Agent Lambda extension, whose layer appconfig_extension_layer_arn names)."
  type        = string
  default     = "s3"
  nullable    = false

  validation {
    condition     = contains(["s3", "appconfig"], var.warm_settings_source)
    error_message = "The warm_settings_source value must be s3 or appconfig."
  }
}

variable "appconfig_extension_layer_arn" {
  # The layer's ARN differs per region and architecture: "Versions of the
  # AWS AppConfig Agent Lambda extension" (AWS AppConfig User Guide).
  description = "With warm_settings_source = appconfig: the ARN of the AWS AppConfig Agent Lambda extension's layer for the function's region and architecture (AWS AppConfig User Guide, \"Versions of the AWS AppConfig Agent Lambda extension\")."
  type        = string
  default     = null

  validation {
    condition     = var.warm_settings == null || var.warm_settings_source != "appconfig" || can(regex("^arn:aws[a-z-]*:lambda:[a-z0-9-]+:[0-9]{12}:layer:[A-Za-z0-9_-]+:[0-9]+$", coalesce(var.appconfig_extension_layer_arn, "x")))
    error_message = "With warm_settings and warm_settings_source = appconfig, appconfig_extension_layer_arn must be the extension layer's versioned ARN, arn:aws:lambda:<region>:<account>:layer:AWS-AppConfig-Extension[-Arm64]:<version>."
  }
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
