# WARM settings in Azure App Configuration, laid out as SimpleL7Proxy lays
# them (docs/settings.md#reloading-settings-warm-and-cold): each setting a key
# Warm:<name>, and the sentinel Warm:Sentinel, whose value changes whenever
# any of them does. The app's only app setting for them is SettingsSource,
# the store's endpoint, written once: a change of warm_settings changes keys
# of the store, no app setting, and so restarts nothing; every instance
# reloads within SettingsRefreshSecs.
#
# App Configuration keys are written through the store's data plane, which
# needs "App Configuration Data Owner" on the store (the provider's
# documentation of azurerm_app_configuration_key): the module grants it to
# the deployer on a store it creates; on one named by app_configuration_id the
# deployer must hold it already.

locals {
  warm_source              = var.warm_settings != null
  create_app_configuration = local.warm_source && var.app_configuration_id == null

  app_configuration_id = !local.warm_source ? null : (
    var.app_configuration_id != null ? var.app_configuration_id : azurerm_app_configuration.settings[0].id
  )
  # The data-plane endpoint, https://<store>.azconfig.io (the form
  # SettingsSource reads with the managed identity).
  app_configuration_endpoint = !local.warm_source ? null : (
    var.app_configuration_id != null ? "https://${lower(regex("[^/]+$", var.app_configuration_id))}.azconfig.io" : azurerm_app_configuration.settings[0].endpoint
  )

  # The sentinel: a hash of every key and value, so it changes whenever one
  # does (and only then).
  warm_sentinel = local.warm_source ? substr(sha256(jsonencode(var.warm_settings)), 0, 16) : null
}

resource "azurerm_app_configuration" "settings" {
  count               = local.create_app_configuration ? 1 : 0
  name                = "${var.name}-settings"
  resource_group_name = var.resource_group_name
  location            = var.location
  sku                 = var.app_configuration_sku
  # Entra ID only: the app reads with its managed identity, Terraform writes
  # with the deployer's (no access keys anywhere).
  local_auth_enabled = false
  tags               = var.tags
}

# The deployer writes the keys (the provider's own example grants it so).
resource "azurerm_role_assignment" "settings_deployer" {
  count                = local.create_app_configuration ? 1 : 0
  scope                = azurerm_app_configuration.settings[0].id
  role_definition_name = "App Configuration Data Owner"
  principal_id         = data.azurerm_client_config.current.object_id
}

# The app reads them (SimpleL7Proxy's role for its identity).
resource "azurerm_role_assignment" "settings_reader" {
  count                = local.warm_source ? 1 : 0
  scope                = local.app_configuration_id
  role_definition_name = "App Configuration Data Reader"
  principal_id         = azurerm_function_app_flex_consumption.gateway.identity[0].principal_id
  principal_type       = "ServicePrincipal"
}

resource "azurerm_app_configuration_key" "warm" {
  for_each               = local.warm_source ? var.warm_settings : {}
  configuration_store_id = local.app_configuration_id
  key                    = "Warm:${each.key}"
  label                  = var.settings_label
  value                  = each.value

  depends_on = [azurerm_role_assignment.settings_deployer]
}

# Written after the keys: an instance that sees the new sentinel lists the
# new keys. (A key removed from warm_settings is deleted after the sentinel
# changes: an instance polling in between keeps it until the next change.)
resource "azurerm_app_configuration_key" "sentinel" {
  count                  = local.warm_source ? 1 : 0
  configuration_store_id = local.app_configuration_id
  key                    = "Warm:Sentinel"
  label                  = var.settings_label
  value                  = local.warm_sentinel

  depends_on = [azurerm_app_configuration_key.warm, azurerm_role_assignment.settings_deployer]
}
