# The gateway as an Azure Functions custom handler on Flex Consumption, with
# identity-based access to its storage account (no keys anywhere).
#
# The deployer needs, on the resource group (on the subscription when the
# group is created in the same apply, as in examples/azure):
# - Contributor, for every resource here and the zip deployment;
# - Role Based Access Control Administrator, User Access Administrator or
#   Owner, for the two role assignments below
#   (Microsoft.Authorization/roleAssignments/write);
# - Storage Blob Data Contributor and Storage Queue Data Contributor: the
#   account has shared keys off, so the provider runs with
#   storage_use_azuread = true, which "requires that the User/Service Principal
#   being used has the associated Storage roles" (the azurerm provider's
#   documentation of storage_use_azuread); management roles hold no data
#   actions.
# Step by step: docs/deploy-azure.md.

locals {
  # The continuation queue: the literal name in functions/continuation/function.json
  # and the AsyncQueue default for AsyncStore=azure. Change both together.
  continuation_queue = "gateway-continuations"
  # The Functions host moves a message past maxDequeueCount to <queue>-poison
  # (and would create that queue itself); the module creates it so that it
  # exists, is visible and goes away with the rest.
  poison_queue = "${local.continuation_queue}-poison"

  # Containers and notification queues named by the profiles (when
  # user_profiles is JSON; list them in result_containers and
  # notification_topics when it is file:<path>).
  profiles            = try(jsondecode(var.user_profiles), [])
  profile_containers  = [for p in local.profiles : p["async-config"]["containername"] if try(p["async-config"]["containername"], "") != ""]
  profile_topics      = [for p in local.profiles : p["async-config"]["topic"] if try(p["async-config"]["topic"], "") != ""]
  notification_queues = distinct(concat(local.profile_topics, var.notification_topics))

  # The gateway's own containers: records, request bodies and the idempotency
  # index in "gateway", results of profiles without a containername in
  # "gateway-results".
  gateway_containers = ["gateway", "gateway-results"]
  result_containers  = distinct(concat(local.gateway_containers, local.profile_containers, var.result_containers))
  deploy_container   = "app-package"

  # Storage account names are global (core.windows.net): by default the
  # name's letters and digits plus a suffix that the name alone does not
  # give (the first 6 hex digits of the hash of the resource group's name and
  # the name), at most 24 characters.
  storage_account_name = coalesce(var.storage_account_name, "${substr(replace(var.name, "-", ""), 0, 18)}${substr(sha256("${var.resource_group_name}/${var.name}"), 0, 6)}")

  # Stored async data is deleted once its request has expired: whole days,
  # rounded up, at least one.
  result_retention_days = max(1, ceil(var.async_ttl_secs / 86400))

  # The execution limit an HTTP invocation runs under: functionTimeout, capped
  # by the platform's load balancer at 230 s, which the gateway counts from
  # 30 s before it sees a request (its HTTPLead: the load balancer's clock
  # starts earlier; docs/deadlines.md, "Azure's HTTP clock"): 200 s.
  http_limit_ms = min(var.function_timeout, 200) * 1000

  function_timeout_text = format("%02d:%02d:%02d", floor(var.function_timeout / 3600), floor(var.function_timeout % 3600 / 60), var.function_timeout % 60)

  # Written by the module from its own resources: the identity-based host
  # storage the Functions host documents ("Azure Functions developer guide",
  # Connecting to host storage with an identity): __accountName with
  # __credential = managedidentity, and the service URIs beside it. The
  # account name is the host's own fallback when its configuration is read
  # before the service URIs are (azure-functions-host #11787: the blob client
  # can fail to build with __blobServiceUri alone; __accountName is the
  # maintainers' workaround) and what the gateway derives missing URIs from.
  #
  # No AzureWebJobsStorage here, not even an empty one. What the provider
  # does with that name (azurerm_function_app_flex_consumption, provider 4.x
  # up to at least 4.81.0: internal/services/appservice/function_app_flex_consumption_resource.go
  # and helpers/function_app_schema.go):
  # - Create and Update always format StorageStringFmt
  #   ("DefaultEndpointsProtocol=https;AccountName=%s;AccountKey=%s;EndpointSuffix=%s")
  #   with the storage_access_key, empty for SystemAssignedIdentity, and
  #   ExpandSiteConfigFunctionFlexConsumptionApp puts it in the app settings
  #   as AzureWebJobsStorage; MergeUserAppSettings then lets an app_settings
  #   entry of the same name (any case) replace it.
  # - Read (unpackFunctionAppFlexConsumptionSettings) keeps every app setting
  #   in app_settings except AzureWebJobsStorage (parsed into
  #   storage_access_key), APPINSIGHTS_INSTRUMENTATIONKEY and
  #   APPLICATIONINSIGHTS_CONNECTION_STRING (into site_config),
  #   WEBSITE_HEALTHCHECK_MAXPINGFAILURES and DEPLOYMENT_STORAGE_CONNECTION_STRING.
  # So an app_settings entry with one of those names is never read back and
  # every plan rewrites the settings, restarting the app (provider issues
  # #30732, #33211); writing none of them, as here, the state read back
  # equals the configuration and a second apply plans no change
  # (terraform/deployed_test.go TestAzureAppSettingsReadBack holds it).
  # The empty value the module used to write to hide the provider's string
  # is a value, not an absence, on the .NET 10 hosts: empty environment
  # variables are now mapped into the host's configuration
  # (azure-functions-host #11794, #11796), and Azure Verified Modules
  # dropped it (terraform-azurerm-avm-res-web-site #376). What remains is the
  # provider's key-less string: it names the account and authorizes nothing.
  # The gateway ignores it beside the identity settings (docs/settings.md#azure-storage-settings), but
  # the Functions host cannot read its keys (nor run the queue trigger) while
  # it is there, and the zip deployment fails: the module removes it itself
  # after every apply that touched the app (azapi_resource_action.app_settings
  # below), which Read never notices, until the provider stops writing it
  # (#29099, #29693).
  # What the deployed app ends up with: terraform/testdata/azure-app-settings.json.
  # OpenTelemetry's own variables (docs/observability.md), written only when set. With an
  # endpoint the host runs in its OpenTelemetry mode too ("Use OpenTelemetry with Azure
  # Functions": AzureFunctionsJobHost__telemetryMode), so its spans and the gateway's reach
  # the same receiver.
  otel_settings = { for k, v in {
    OTEL_EXPORTER_OTLP_ENDPOINT          = var.otel_exporter_otlp_endpoint
    OTEL_EXPORTER_OTLP_HEADERS           = var.otel_exporter_otlp_headers
    OTEL_SERVICE_NAME                    = var.otel_exporter_otlp_endpoint == null ? null : var.name
    AzureFunctionsJobHost__telemetryMode = var.otel_exporter_otlp_endpoint == null ? null : "OpenTelemetry"
  } : k => v if v != null }

  host_settings = {
    AsyncStore                             = "azure"
    AsyncQueue                             = local.continuation_queue
    AzureWebJobsStorage__blobServiceUri    = azurerm_storage_account.gateway.primary_blob_endpoint
    AzureWebJobsStorage__queueServiceUri   = azurerm_storage_account.gateway.primary_queue_endpoint
    AzureWebJobsStorage__accountName       = azurerm_storage_account.gateway.name
    AzureWebJobsStorage__credential        = "managedidentity"
    AzureFunctionsJobHost__functionTimeout = local.function_timeout_text
    # The instance's memory, which nothing on a Flex Consumption instance
    # tells the handler (its cgroup and MemTotal may be the machine's): the
    # gateway sets its soft memory limit (GOMEMLIMIT) from it and holds
    # MaxBufferedBytes and MaxRetryBodyBytes against that limit
    # (functions/memory.go; docs/settings.md). The same variable sizes the
    # instance below (instance_memory_in_mb).
    InstanceMemoryMB = tostring(var.instance_memory_in_mb)
  }
}

# The tenant Terraform signs in to: the default issuer of the tokens App
# Service Authentication accepts (authentication = entra).
data "azurerm_client_config" "current" {}

locals {
  entra_tenant_id            = var.entra_tenant_id != null ? var.entra_tenant_id : data.azurerm_client_config.current.tenant_id
  entra_tenant_auth_endpoint = "https://login.microsoftonline.com/${local.entra_tenant_id}/v2.0"

  # The HTTP function's authLevel the package must be built with, for the
  # module's authentication: make package-azure AZURE_AUTH_LEVEL=<this>.
  # functions/gateway/function.json ships function.
  package_auth_level = var.authentication == "none" ? "anonymous" : "function"
}

resource "azurerm_storage_account" "gateway" {
  name                     = local.storage_account_name
  resource_group_name      = var.resource_group_name
  location                 = var.location
  account_tier             = "Standard"
  account_replication_type = "LRS"
  account_kind             = "StorageV2"

  https_traffic_only_enabled      = true
  min_tls_version                 = "TLS1_2"
  shared_access_key_enabled       = false
  allow_nested_items_to_be_public = false
  default_to_oauth_authentication = true

  tags = var.tags
}

resource "azurerm_storage_container" "deploy" {
  name                  = local.deploy_container
  storage_account_id    = azurerm_storage_account.gateway.id
  container_access_type = "private"
}

resource "azurerm_storage_container" "results" {
  for_each              = toset(local.result_containers)
  name                  = each.value
  storage_account_id    = azurerm_storage_account.gateway.id
  container_access_type = "private"
}

resource "azurerm_storage_queue" "continuations" {
  name               = local.continuation_queue
  storage_account_id = azurerm_storage_account.gateway.id
}

resource "azurerm_storage_queue" "poison" {
  name               = local.poison_queue
  storage_account_id = azurerm_storage_account.gateway.id
}

resource "azurerm_storage_queue" "notifications" {
  for_each           = toset(local.notification_queues)
  name               = each.value
  storage_account_id = azurerm_storage_account.gateway.id
}

resource "azurerm_storage_management_policy" "results" {
  storage_account_id = azurerm_storage_account.gateway.id

  rule {
    name    = "expire-async-results"
    enabled = true

    filters {
      blob_types   = ["blockBlob"]
      prefix_match = [for c in local.result_containers : "${c}/"]
    }

    actions {
      base_blob {
        delete_after_days_since_creation_greater_than = local.result_retention_days
      }
    }
  }

  # A rule's prefixMatch takes at most 10 prefixes ("Azure Blob Storage
  # lifecycle management overview", Rule filters), and Azure refuses more at
  # apply: the two gateway containers leave room for 8 of the profiles and
  # result_containers. Refused here, at plan, with the way out.
  lifecycle {
    precondition {
      condition     = length(local.result_containers) <= 10
      error_message = "At most 10 result containers (gateway, gateway-results and 8 from the profiles' containername and result_containers): the expiry rule's prefix_match takes 10 prefixes. Let more profiles share a containername (results are kept apart by their id)."
    }
  }
}

resource "azurerm_log_analytics_workspace" "gateway" {
  name                = "${var.name}-logs"
  resource_group_name = var.resource_group_name
  location            = var.location
  sku                 = "PerGB2018"
  retention_in_days   = var.log_retention_days
  tags                = var.tags
}

resource "azurerm_application_insights" "gateway" {
  name                = "${var.name}-insights"
  resource_group_name = var.resource_group_name
  location            = var.location
  workspace_id        = azurerm_log_analytics_workspace.gateway.id
  application_type    = "other"
  retention_in_days   = var.log_retention_days
  tags                = var.tags
}

resource "azurerm_service_plan" "gateway" {
  name                = "${var.name}-plan"
  resource_group_name = var.resource_group_name
  location            = var.location
  os_type             = "Linux"
  sku_name            = "FC1"
  tags                = var.tags
}

resource "azurerm_function_app_flex_consumption" "gateway" {
  name                = var.name
  resource_group_name = var.resource_group_name
  location            = var.location
  service_plan_id     = azurerm_service_plan.gateway.id
  https_only          = true

  storage_container_type      = "blobContainer"
  storage_container_endpoint  = "${azurerm_storage_account.gateway.primary_blob_endpoint}${azurerm_storage_container.deploy.name}"
  storage_authentication_type = "SystemAssignedIdentity"

  runtime_name           = "custom"
  runtime_version        = var.runtime_version
  instance_memory_in_mb  = var.instance_memory_in_mb
  maximum_instance_count = var.maximum_instance_count

  identity {
    type = "SystemAssigned"
  }

  site_config {
    application_insights_connection_string = azurerm_application_insights.gateway.connection_string
    minimum_tls_version                    = "1.2"
  }

  app_settings = local.app_settings

  # App Service Authentication (authentication = entra): every request
  # without a valid Entra ID token for entra_client_id is answered 401 before
  # the Functions host sees it; the platform then sets WEBSITE_AUTH_ENABLED,
  # by which the gateway trusts the X-MS-CLIENT-PRINCIPAL* headers it adds.
  # The arguments: the provider's documentation of
  # azurerm_function_app_flex_consumption (auth_settings_v2,
  # active_directory_v2, login); the behaviour: "Authentication and
  # authorization in Azure App Service and Azure Functions" and "Configure
  # your App Service or Azure Functions app to use Microsoft Entra sign-in".
  # The function key stays wanted behind it (the package's authLevel is
  # function): Flex Consumption's own page ("Azure Functions Flex Consumption
  # plan hosting", Considerations) said during its preview that "EasyAuth is
  # currently not supported" and that "Unauthenticated callers currently
  # aren't blocked when EasyAuth is enabled", so the key is the door this
  # module can be sure of on every plan; docs/security.md.
  dynamic "auth_settings_v2" {
    for_each = var.authentication == "entra" ? [var.entra_client_id] : []
    content {
      auth_enabled           = true
      require_authentication = true
      unauthenticated_action = "Return401"
      require_https          = true

      active_directory_v2 {
        client_id            = auth_settings_v2.value
        tenant_auth_endpoint = local.entra_tenant_auth_endpoint
        # The client ID is always an allowed audience (v2.0 tokens); the App
        # ID URI is the audience of v1.0 tokens asked for with --resource.
        allowed_audiences = ["api://${auth_settings_v2.value}"]
        # null, not []: an empty allow-list would admit no application.
        allowed_applications = length(var.entra_allowed_applications) > 0 ? var.entra_allowed_applications : null
      }

      # No sign-in pages and no token store: callers bring their own tokens.
      login {
        token_store_enabled = false
      }
    }
  }

  tags = var.tags

  lifecycle {
    precondition {
      condition     = var.function_limit_margin_ms < local.http_limit_ms
      error_message = "function_limit_margin_ms must be less than the HTTP execution limit, min(function_timeout, 200 s)."
    }
    precondition {
      condition     = var.timeout == tonumber(local.gateway_defaults.Timeout) || var.timeout <= local.http_limit_ms - var.function_limit_margin_ms
      error_message = "timeout must fit one HTTP invocation: at most min(function_timeout, 200 s) less function_limit_margin_ms, in ms."
    }
    precondition {
      condition     = alltrue([for r in coalesce(var.routes, []) : r.timeoutMs == null || coalesce(r.timeoutMs, 0) <= local.http_limit_ms - var.function_limit_margin_ms])
      error_message = "Every route's timeoutMs must fit one HTTP invocation: at most min(function_timeout, 200 s) less function_limit_margin_ms."
    }
    precondition {
      condition     = !var.async_mode_enabled || var.async_trigger_timeout == tonumber(local.gateway_defaults.AsyncTriggerTimeout) || var.async_trigger_timeout <= local.http_limit_ms - var.function_limit_margin_ms
      error_message = "async_trigger_timeout must let the 202 go out inside one HTTP invocation: at most min(function_timeout, 200 s) less function_limit_margin_ms."
    }
    precondition {
      condition     = var.function_timeout_secs == null || coalesce(var.function_timeout_secs, 0) <= var.function_timeout
      error_message = "function_timeout_secs must not exceed function_timeout, the host's own limit."
    }
    # The gateway holds the body budgets against its soft memory limit, 80 %
    # of InstanceMemoryMB (functions/gc.go, gcLimitShare): refused here
    # rather than at the app's start-up. A max_buffered_bytes left at its
    # default is lowered by the gateway to fit.
    precondition {
      condition     = var.max_buffered_bytes == tonumber(local.gateway_defaults.MaxBufferedBytes) || var.max_buffered_bytes <= floor(var.instance_memory_in_mb * 1048576 * 0.8)
      error_message = "max_buffered_bytes must fit under the gateway's soft memory limit: at most 80 % of instance_memory_in_mb, in bytes."
    }
    precondition {
      condition     = var.max_retry_body_bytes <= floor(var.instance_memory_in_mb * 1048576 * 0.8)
      error_message = "max_retry_body_bytes must fit under the gateway's soft memory limit: at most 80 % of instance_memory_in_mb, in bytes."
    }
  }
}

# Data-plane roles only, on this storage account only, as Microsoft documents
# them for an identity-based AzureWebJobsStorage ("Azure Functions developer
# guide", Connecting to host storage with an identity: "The Storage Blob Data
# Owner role covers the basic needs of Functions host storage - the runtime
# needs both read and write access to blobs and the ability to create
# containers"; queue triggers and outputs: Storage Queue Data Contributor, in
# the same guide's table of roles per binding). Storage Blob Data Owner also
# holds Microsoft.Storage/storageAccounts/blobServices/generateUserDelegationKey/action,
# the one action Get User Delegation Key needs to sign the gateway's result
# SAS URLs (Storage REST API, Get User Delegation Key, Authorization), and the
# flex deployment container is read with it. Storage Queue Data Contributor
# covers sending, receiving and deleting continuation and notification
# messages and creating a missing queue (the host's -poison queue). Nothing
# else: no Owner, no key access (shared keys are off).
resource "azurerm_role_assignment" "blob" {
  scope                = azurerm_storage_account.gateway.id
  role_definition_name = "Storage Blob Data Owner"
  principal_id         = azurerm_function_app_flex_consumption.gateway.identity[0].principal_id
  principal_type       = "ServicePrincipal"
}

resource "azurerm_role_assignment" "queue" {
  scope                = azurerm_storage_account.gateway.id
  role_definition_name = "Storage Queue Data Contributor"
  principal_id         = azurerm_function_app_flex_consumption.gateway.identity[0].principal_id
  principal_type       = "ServicePrincipal"
}

# The settings the provider writes on every create and update of the app
# that the app must not keep (above, "No AzureWebJobsStorage here"): the
# key-less AzureWebJobsStorage, with which the Functions host cannot read its
# keys, so the zip deployment and the function keys fail, and the queue
# trigger may take it for its connection (azure-functions-host #11796).
locals {
  removed_app_settings = ["AzureWebJobsStorage"]
}

# What the app's settings are after the provider's apply: Web Apps - List
# Application Settings (POST .../config/appsettings/list). Read at apply time
# whenever the app changes (a data source that depends on a resource with
# changes pending is read during the apply, after it).
data "azapi_resource_action" "app_settings" {
  type                   = "Microsoft.Web/sites/config@2024-04-01"
  resource_id            = "${azurerm_function_app_flex_consumption.gateway.id}/config/appsettings"
  action                 = "list"
  method                 = "POST"
  response_export_values = ["properties"]

  depends_on = [azurerm_function_app_flex_consumption.gateway]
}

# The same settings without removed_app_settings, written back whole: Web
# Apps - Update Application Settings (PUT .../config/appsettings replaces
# the set). Replaced, so run again, after every change of the app, which is
# when the provider writes AzureWebJobsStorage again; a second apply with
# nothing changed runs nothing. The Azure API: "Web Apps - List Application
# Settings" and "Web Apps - Update Application Settings" (Microsoft.Web
# REST API 2024-04-01); the resource: the azapi provider's documentation of
# azapi_resource_action (method PUT, body).
resource "azapi_resource_action" "app_settings" {
  type        = "Microsoft.Web/sites/config@2024-04-01"
  resource_id = "${azurerm_function_app_flex_consumption.gateway.id}/config/appsettings"
  method      = "PUT"
  body = {
    properties = { for k, v in data.azapi_resource_action.app_settings.output.properties : k => v if !contains([for r in local.removed_app_settings : lower(r)], lower(k)) }
  }

  lifecycle {
    replace_triggered_by = [azurerm_function_app_flex_consumption.gateway]
  }
}
