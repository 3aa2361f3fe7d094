# --- monitoring: the workbook, the alerts and their action group --------------
#
# docs/operations.md describes every panel and alert. The workbook is
# generated from terraform/monitoring/panels.json (TestMonitoringGenerated);
# every field of the gateway's log line it and the alerts read is one the
# binary writes (TestMonitoringNamesEmitted).
#
# What the gateway says reaches Log Analytics as its per-request log line: the
# Functions host sends the custom handler's standard output to Application
# Insights (the AppTraces table of the workspace). Its OpenTelemetry metrics
# go to the OTLP receiver otel_exporter_otlp_endpoint names, not here.

locals {
  # The gateway's per-request log lines ("request" and "request stream
  # cut"), each parsed as j (the workbook's {gateway}), without the lines of
  # its own endpoints (route /_gateway/: status polls, result reads,
  # /_gateway/stats, /_gateway/health), which are no gateway requests.
  gateway_lines = "AppTraces | where Message contains_cs '\"msg\":\"request' | extend j = parse_json(substring(Message, indexof(Message, '{'))) | where tostring(j.route) != '/_gateway/'"
  # The continuation invocations' lines that say how long their message
  # waited in the queue (queueAgeMs: now − the message's InsertionTime, from
  # the queue trigger's metadata), each parsed as j (the workbook's
  # {continuations}).
  continuation_lines = "AppTraces | where Message contains_cs '\"queueAgeMs\":' | extend j = parse_json(substring(Message, indexof(Message, '{')))"
  # A continuation that waited a quarter of its request's life has lost a
  # quarter of its time to finish; 900 s at most, as on AWS.
  continuation_age_secs = coalesce(var.alarms.continuation_age_secs, min(900, ceil(var.async_ttl_secs / 4)))
  # A p99 past half the request TTL: the slowest requests spend most of
  # their budget, a step from 504 TTLExpired (as on AWS).
  latency_p99_ms = coalesce(var.alarms.latency_p99_ms, var.default_ttl_secs * 500)
  alert_actions  = [azurerm_monitor_action_group.alerts.id]
}

resource "azurerm_application_insights_workbook" "gateway" {
  name                = uuidv5("url", "${azurerm_log_analytics_workspace.gateway.id}/workbooks/gateway")
  resource_group_name = var.resource_group_name
  location            = var.location
  display_name        = "${var.name} gateway"
  source_id           = lower(azurerm_log_analytics_workspace.gateway.id)
  data_json = templatefile("${path.module}/workbook.json.tftpl", {
    workspace_id = azurerm_log_analytics_workspace.gateway.id
    poison_queue = local.poison_queue
    memory_mb    = var.instance_memory_in_mb
  })
  tags = var.tags
}

# The queue and blob services' metrics, into the workspace (AzureMetrics), for
# the workbook's queue and cost panels; and the queue service's write and
# delete requests (StorageQueueLogs: "Supported logs for
# Microsoft.Storage/storageAccounts/queueServices", StorageWrite and
# StorageDelete), from which the dead-letter alert counts the messages put
# into the poison queue and not deleted since. They log every continuation
# and notification message too (two rows each): the cost is in
# docs/operations.md#cost-of-the-monitoring-itself.
resource "azurerm_monitor_diagnostic_setting" "storage" {
  for_each                   = toset(["queueServices", "blobServices"])
  name                       = "${var.name}-${lower(each.value)}"
  target_resource_id         = "${azurerm_storage_account.gateway.id}/${each.value}/default"
  log_analytics_workspace_id = azurerm_log_analytics_workspace.gateway.id

  dynamic "enabled_log" {
    for_each = each.value == "queueServices" ? ["StorageWrite", "StorageDelete"] : []
    content {
      category = enabled_log.value
    }
  }

  enabled_metric {
    category = "Capacity"
  }
  enabled_metric {
    category = "Transaction"
  }
}

resource "azurerm_monitor_action_group" "alerts" {
  name                = "${var.name}-alerts"
  resource_group_name = var.resource_group_name
  short_name          = "gateway"
  tags                = var.tags

  dynamic "email_receiver" {
    for_each = var.alarms.email == null ? [] : [var.alarms.email]
    content {
      name                    = "operator"
      email_address           = email_receiver.value
      use_common_alert_schema = true
    }
  }
}

# One log alert per condition, over the workspace, every 5 minutes (docs/operations.md#alarms-and-alerts-what-each-means-what-to-do).
# A condition that comes and goes (an event, a rate, a latency) alerts when
# it held in 3 of the last 5 periods (failing_periods), so one bad request
# in one period pages nobody and a failure of 15 minutes in 25 does. The
# rates and the latency are by route (the query's route column as a
# dimension: one alert per failing route, naming it), each in periods with
# at least alarms.rate_min_requests of the route's requests (fewer: no
# row, no alert). measure: the column the alert compares (null: the count
# of rows). The lines the alerts count are never sampled away: host.json
# excludes Request and Trace from the host's adaptive sampling
# (functions/host.json; TestAlertsNotSampled).
locals {
  rate_min = var.alarms.rate_min_requests
  # The alerts' route dimension: the line's route, "(no route)" for a
  # request no route matched (a dimension value is never empty).
  route_dimension = "iff(tostring(j.route) == '', '(no route)', tostring(j.route))"
  # 429s the platform answered itself: an invocation answered 429 that no
  # gateway line answered (a backend's 429 the gateway relays has one, in
  # the same operation).
  platform_429s = "let gateway429 = ${local.gateway_lines} | where toint(j.status) == 429 | distinct OperationId; AppRequests | where ResultCode == '429' and OperationId !in (gateway429)"
  log_alerts = {
    # What waits in the poison queue: the messages put into it (the host's
    # moves) less those deleted from it (redrive, purge), over the longest
    # look-back a log alert has (2 days, query_time_range_override), so it
    # stays red until the letters are dealt with, for 2 days at most.
    dead-letters = {
      description = "Continuations waiting in the poison queue, set aside in the last 2 days and not redriven or purged (docs/operations.md#dead-letters-visible)."
      query       = "StorageQueueLogs | where Uri contains '/${local.poison_queue}/messages' and toint(StatusCode) between (200 .. 299) | summarize waiting = countif(OperationName == 'PutMessage') - countif(OperationName == 'DeleteMessage')"
      threshold   = var.alarms.dead_letters
      severity    = 1
      measure     = "waiting"
      by_route    = false
      periods     = 1
    }
    continuation-age = {
      description = "Continuations had waited in the queue longer than alarms.continuation_age_secs when their invocation received them, in 3 of 5 periods (docs/operations.md#oldest-continuation)."
      query       = "${local.continuation_lines} | where toint(j.queueAgeMs) > ${local.continuation_age_secs * 1000}"
      threshold   = 0
      severity    = 2
      measure     = null
      by_route    = false
      periods     = 3
    }
    function-limit = {
      description = "Requests ended by the function's execution limit, 504 FunctionLimit, in 3 of 5 periods (docs/operations.md#functionlimit-endings)."
      query       = "${local.gateway_lines} | where tostring(j.code) == 'FunctionLimit'"
      threshold   = var.alarms.function_limit_endings
      severity    = 2
      measure     = null
      by_route    = false
      periods     = 3
    }
    function-errors = {
      description = "Invocations the function itself failed, in 3 of 5 periods (docs/operations.md#function-errors)."
      query       = "AppRequests | where Success == false"
      threshold   = var.alarms.function_errors
      severity    = 2
      measure     = null
      by_route    = false
      periods     = 3
    }
    throttles = {
      description = "Invocations the platform answered 429 itself (not a backend's 429), in 3 of 5 periods (docs/operations.md#throttles)."
      query       = local.platform_429s
      threshold   = var.alarms.throttles
      severity    = 2
      measure     = null
      by_route    = false
      periods     = 3
    }
    error-rate = {
      description = "A route answered more than alarms.error_rate_percent of its requests 5xx, the backend's or the gateway's, in 3 of 5 periods (docs/operations.md#5xx-rate)."
      query       = "${local.gateway_lines} | summarize requests = count(), failed = countif(toint(j.status) >= 500) by route = ${local.route_dimension} | where requests >= ${local.rate_min} | extend rate = 100.0 * failed / requests"
      threshold   = var.alarms.error_rate_percent
      severity    = 1
      measure     = "rate"
      by_route    = true
      periods     = 3
    }
    deadline-rate = {
      description = "A route ended more than alarms.deadline_rate_percent of its requests 504 TTLExpired or AttemptTimeout in 3 of 5 periods (docs/operations.md#deadline-rate)."
      query       = "${local.gateway_lines} | summarize requests = count(), failed = countif(tostring(j.code) == 'TTLExpired' or tostring(j.code) == 'AttemptTimeout') by route = ${local.route_dimension} | where requests >= ${local.rate_min} | extend rate = 100.0 * failed / requests"
      threshold   = var.alarms.deadline_rate_percent
      severity    = 2
      measure     = "rate"
      by_route    = true
      periods     = 3
    }
    backend-unavailable-rate = {
      description = "A route ended more than alarms.backend_unavailable_rate_percent of its requests 502 BackendUnavailable in 3 of 5 periods (docs/operations.md#backendunavailable-rate)."
      query       = "${local.gateway_lines} | summarize requests = count(), failed = countif(tostring(j.code) == 'BackendUnavailable') by route = ${local.route_dimension} | where requests >= ${local.rate_min} | extend rate = 100.0 * failed / requests"
      threshold   = var.alarms.backend_unavailable_rate_percent
      severity    = 1
      measure     = "rate"
      by_route    = true
      periods     = 3
    }
    async-unavailable = {
      description = "A route refused more than alarms.async_unavailable_percent of its async hand-offs 503 AsyncUnavailable (the async store or queue is down) in 3 of 5 periods (docs/operations.md#async-store-unavailable)."
      query       = "${local.gateway_lines} | summarize handoffs = countif(tostring(j.async) != '' and toint(j.status) == 202) + countif(tostring(j.code) == 'AsyncUnavailable'), failed = countif(tostring(j.code) == 'AsyncUnavailable') by route = ${local.route_dimension} | where handoffs >= ${local.rate_min} | extend rate = 100.0 * failed / handoffs"
      threshold   = var.alarms.async_unavailable_percent
      severity    = 1
      measure     = "rate"
      by_route    = true
      periods     = 3
    }
    latency-p99 = {
      description = "A route's p99 request duration above alarms.latency_p99_ms in 3 of 5 periods (docs/operations.md#p99-latency)."
      query       = "${local.gateway_lines} | summarize requests = count(), p99 = percentile(todouble(j.durationMs), 99) by route = ${local.route_dimension} | where requests >= ${local.rate_min}"
      threshold   = local.latency_p99_ms
      severity    = 2
      measure     = "p99"
      by_route    = true
      periods     = 3
    }
  }
}

resource "azurerm_monitor_scheduled_query_rules_alert_v2" "gateway" {
  for_each             = local.log_alerts
  name                 = "${var.name}-${each.key}"
  resource_group_name  = var.resource_group_name
  location             = var.location
  description          = each.value.description
  scopes               = [azurerm_log_analytics_workspace.gateway.id]
  severity             = each.value.severity
  evaluation_frequency = "PT5M"
  window_duration      = "PT5M"
  # The dead letters are counted over 2 days (above); the others over the
  # 5-minute window.
  query_time_range_override = each.key == "dead-letters" ? "P2D" : null
  # Created in the same apply as the workspace, whose tables have no data
  # yet: Azure Monitor would refuse a query it cannot validate against them
  # ("Failed to resolve table or column expression"); the queries are held
  # against the binary's lines offline instead (TestMonitoringNamesEmitted).
  skip_query_validation = true

  criteria {
    query                   = each.value.query
    time_aggregation_method = each.value.measure == null ? "Count" : "Maximum"
    metric_measure_column   = each.value.measure
    operator                = "GreaterThan"
    threshold               = each.value.threshold

    dynamic "dimension" {
      for_each = each.value.by_route ? ["route"] : []
      content {
        name     = dimension.value
        operator = "Include"
        values   = ["*"]
      }
    }

    failing_periods {
      minimum_failing_periods_to_trigger_alert = each.value.periods
      number_of_evaluation_periods             = each.value.periods == 1 ? 1 : 5
    }
  }

  action {
    action_groups = local.alert_actions
  }

  tags = var.tags
}

# The backlog: Azure Queue Storage has no per-queue depth or age metric, only
# the account's QueueMessageCount (all its queues, a capacity metric sampled
# hourly whose one aggregation is Average: "Supported metrics for
# Microsoft.Storage/storageAccounts/queueServices"; Maximum is refused with
# a 400, TestMetricAlertAggregations). The
# continuation-age alert above reads the age the gateway logs when a
# continuation arrives; a queue nobody drains writes no such line, and this
# alert is the one that sees it.
resource "azurerm_monitor_metric_alert" "queue_messages" {
  name                = "${var.name}-queue-messages"
  resource_group_name = var.resource_group_name
  scopes              = ["${azurerm_storage_account.gateway.id}/queueServices/default"]
  description         = "More messages in the account's queues than alarms.queue_messages (docs/operations.md#queue-messages)."
  severity            = 2
  frequency           = "PT1H"
  window_size         = "PT6H"

  criteria {
    metric_namespace = "Microsoft.Storage/storageAccounts/queueServices"
    metric_name      = "QueueMessageCount"
    aggregation      = "Average"
    operator         = "GreaterThan"
    threshold        = var.alarms.queue_messages
  }

  action {
    action_group_id = azurerm_monitor_action_group.alerts.id
  }

  tags = var.tags
}
