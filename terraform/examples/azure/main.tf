# Deploys the gateway to Azure Functions (Flex Consumption) in a new resource
# group. Then publish the app: make package-azure, and
#   az functionapp deployment source config-zip -g <group> -n <app> --src dist/azure-functionapp.zip
# with the resource_group_name and function_app_name outputs. Step by step,
# with the roles the deployer needs: docs/deploy-azure.md.

provider "azurerm" {
  features {}
  # The storage account has shared keys disabled: manage its containers and
  # queues with Entra ID. The deployer then needs data-plane roles on the
  # account too (Storage Blob Data Contributor, Storage Queue Data
  # Contributor): the provider's documentation of storage_use_azuread, and
  # docs/deploy-azure.md.
  storage_use_azuread = true
  subscription_id     = var.subscription_id
}

resource "azurerm_resource_group" "gateway" {
  name     = "${var.name}-rg"
  location = var.location
}

module "gateway" {
  source = "../../azure"

  name                = var.name
  resource_group_name = azurerm_resource_group.gateway.name
  location            = azurerm_resource_group.gateway.location

  authentication  = var.authentication
  entra_client_id = var.entra_client_id

  hosts                 = var.hosts
  async_mode_enabled    = true
  async_trigger_timeout = var.async_trigger_timeout
  function_timeout      = 600
  timeout               = 120000
  user_profiles = jsonencode([
    { userId = "batch", "async-config" = { enabled = true, containername = "batch-results", topic = "batch-events" } },
  ])

  # Who the alarms page (docs/operations.md#alarms-and-alerts-what-each-means-what-to-do); the thresholds are the
  # module's defaults.
  alarms = { email = var.alarm_email }

  # WARM settings, changed live: docs/deploy-azure.md#7-change-a-setting.
  warm_settings = var.warm_settings
}
