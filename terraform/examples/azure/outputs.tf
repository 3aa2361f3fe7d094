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
