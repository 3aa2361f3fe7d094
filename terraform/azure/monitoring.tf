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
  # cut"), each parsed as j (the workbook's {gateway}).
  gateway_lines = "AppTraces | where Message contains_cs '\"msg\":\"request' | extend j = parse_json(substring(Message, indexof(Message, '{')))"
  # The continuation invocations' lines that say how long their message
  # waited in the queue (queueAgeMs: now − the message's InsertionTime, from
  # the queue trigger's metadata), each parsed as j (the workbook's
  # {continuations}).
  continuation_lines = "AppTraces | where Message contains_cs '\"queueAgeMs\":' | extend j = parse_json(substring(Message, indexof(Message, '{')))"
  # A continuation that waited a quarter of its request's life has lost a
  # quarter of its time to finish; 900 s at most, as on AWS.
  continuation_age_secs = coalesce(var.alarms.continuation_age_secs, min(900, ceil(var.async_ttl_secs / 4)))
  alert_actions         = [azurerm_monitor_action_group.alerts.id]
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
# the workbook's queue and cost panels.
resource "azurerm_monitor_diagnostic_setting" "storage" {
  for_each                   = toset(["queueServices", "blobServices"])
  name                       = "${var.name}-${lower(each.value)}"
  target_resource_id         = "${azurerm_storage_account.gateway.id}/${each.value}/default"
  log_analytics_workspace_id = azurerm_log_analytics_workspace.gateway.id

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

# One log alert per condition, over the workspace, every 5 minutes.
locals {
  log_alerts = {
    dead-letters = {
      description = "Continuations the host moved to the poison queue (docs/operations.md#dead-letters-visible)."
      query       = "AppTraces | where Message contains 'Moving message to queue' and Message contains '${local.poison_queue}'"
      threshold   = var.alarms.dead_letters
      severity    = 1
    }
    continuation-age = {
      description = "A continuation had waited in the queue longer than alarms.continuation_age_secs when its invocation received it (docs/operations.md#oldest-continuation)."
      query       = "${local.continuation_lines} | where toint(j.queueAgeMs) > ${local.continuation_age_secs * 1000}"
      threshold   = 0
      severity    = 2
    }
    function-limit = {
      description = "Requests ended by the function's execution limit, 504 FunctionLimit (docs/operations.md#functionlimit-endings)."
      query       = "${local.gateway_lines} | where tostring(j.code) == 'FunctionLimit'"
      threshold   = var.alarms.function_limit_endings
      severity    = 2
    }
    function-errors = {
      description = "Invocations the function itself failed (docs/operations.md#function-errors)."
      query       = "AppRequests | where Success == false"
      threshold   = var.alarms.function_errors
      severity    = 2
    }
    throttles = {
      description = "Invocations answered 429 (docs/operations.md#throttles)."
      query       = "AppRequests | where ResultCode == '429'"
      threshold   = var.alarms.throttles
      severity    = 2
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

  criteria {
    query                   = each.value.query
    time_aggregation_method = "Count"
    operator                = "GreaterThan"
    threshold               = each.value.threshold

    failing_periods {
      minimum_failing_periods_to_trigger_alert = 1
      number_of_evaluation_periods             = 1
    }
  }

  action {
    action_groups = local.alert_actions
  }

  tags = var.tags
}

# The backlog: Azure Queue Storage has no per-queue depth or age metric, only
# the account's QueueMessageCount (all its queues, sampled hourly: "Supported
# metrics for Microsoft.Storage/storageAccounts/queueServices"). The
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
    aggregation      = "Maximum"
    operator         = "GreaterThan"
    threshold        = var.alarms.queue_messages
  }

  action {
    action_group_id = azurerm_monitor_action_group.alerts.id
  }

  tags = var.tags
}
