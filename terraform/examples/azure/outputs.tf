output "invoke_url" {
  description = "The gateway's public base URL."
  value       = module.gateway.invoke_url
}

output "function_app_name" {
  description = "The function app to publish dist/azure-functionapp.zip to."
  value       = module.gateway.function_app_name
}

output "resource_group_name" {
  description = "The resource group holding everything."
  value       = azurerm_resource_group.gateway.name
}

output "package_auth_level" {
  description = "The authLevel to build the package with: make package-azure AZURE_AUTH_LEVEL=<this>."
  value       = module.gateway.package_auth_level
}

output "entra_scope" {
  description = "With authentication = entra: the scope callers ask their tokens for (functions check --entra-scope)."
  value       = module.gateway.entra_scope
}

output "settings_source" {
  description = "With warm_settings: where the gateway reads them from (its SettingsSource); null otherwise."
  value       = module.gateway.settings_source
}
