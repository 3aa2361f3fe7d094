variable "subscription_id" {
  description = "The Azure subscription to deploy into."
  type        = string
}

variable "name" {
  description = "Base name of the resources (3-32 lowercase letters, digits and hyphens, the module's rule). Globally unique: the function app is <name>.azurewebsites.net, so there is no default."
  type        = string
}

variable "location" {
  description = "An Azure region that offers Flex Consumption."
  type        = string
  default     = "swedencentral"
}

variable "hosts" {
  description = "The backends' base URLs, tried in this order."
  type        = list(string)
}

variable "async_trigger_timeout" {
  description = "AsyncTriggerTimeout, in ms: how long an async-eligible request waits for its backend before it is answered 202. 10000 is the gateway's default; 1 sends every async-eligible request async at once, to try the async API with a fast backend."
  type        = number
  default     = 10000
}

variable "authentication" {
  description = "What stands in front of the gateway (the module's authentication): function_keys (a key of the app on every request), entra (an Entra ID token for entra_client_id, and the key) or none (open to anyone; build with make package-azure AZURE_AUTH_LEVEL=anonymous)."
  type        = string
  default     = "function_keys"
}

variable "entra_client_id" {
  description = "With authentication = entra: the application (client) ID of the app registration that stands for the gateway."
  type        = string
  default     = null
}

variable "alarm_email" {
  description = "The address the alarms notify (the alerts' action group e-mails it). null: the alarms are created and notify nobody."
  type        = string
  default     = null
}

variable "warm_settings" {
  description = "WARM settings kept in the settings source instead of the function's settings, keyed by setting name ({ DefaultTTLSecs = \"60\" }): changing them restarts nothing (docs/settings.md#reloading-settings-warm-and-cold). null: none."
  type        = map(string)
  default     = null
}
