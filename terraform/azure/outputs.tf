output "invoke_url" {
  description = "The gateway's public base URL: every path under it reaches the gateway (the route prefix is empty)."
  value       = "https://${azurerm_function_app_flex_consumption.gateway.default_hostname}/"
}

output "authentication" {
  description = "What stands in front of the gateway: function_keys, entra (and the key) or none."
  value       = var.authentication
}

output "package_auth_level" {
  description = "The HTTP function's authLevel the package must be built with: make package-azure AZURE_AUTH_LEVEL=<this> (function unless authentication = none)."
  value       = local.package_auth_level
}

output "entra_scope" {
  description = "With authentication = entra: the scope callers ask their tokens for (functions check --entra-scope); null otherwise."
  value       = var.authentication == "entra" ? "api://${var.entra_client_id}/.default" : null
}

output "function_app_name" {
  description = "The function app's name (for az functionapp deployment source config-zip / func azure functionapp publish)."
  value       = azurerm_function_app_flex_consumption.gateway.name
}

output "principal_id" {
  description = "The function app's system-assigned identity (its data-plane roles are on the storage account only)."
  value       = azurerm_function_app_flex_consumption.gateway.identity[0].principal_id
}

output "storage_account_name" {
  description = "The storage account holding the deployment package, async records and results, and the queues."
  value       = azurerm_storage_account.gateway.name
}

output "continuation_queue_name" {
  description = "The continuation queue (AsyncQueue)."
  value       = azurerm_storage_queue.continuations.name
}

output "poison_queue_name" {
  description = "Where the Functions host moves a continuation message after maxDequeueCount failed deliveries."
  value       = azurerm_storage_queue.poison.name
}

output "notification_queue_names" {
  description = "The lifecycle notification queues (the profiles' topics)."
  value       = sort(local.notification_queues)
}

output "result_containers" {
  description = "The blob containers holding async records and results, deleted after result_retention_days."
  value       = sort(local.result_containers)
}

output "result_retention_days" {
  description = "Days after which stored async data is deleted: AsyncTTLSecs in whole days, rounded up."
  value       = local.result_retention_days
}

output "app_settings" {
  description = "The app settings the module writes (gateway settings that differ from the gateway's defaults, and the host's)."
  value       = local.app_settings
}

output "settings_source" {
  description = "With warm_settings: the App Configuration store's endpoint the app reads them from (its SettingsSource); null otherwise."
  value       = local.app_configuration_endpoint
}

output "app_configuration_id" {
  description = "With warm_settings: the App Configuration store holding them (Warm:<setting> and Warm:Sentinel); null otherwise."
  value       = local.app_configuration_id
}
