# TFLint for terraform/: the bundled terraform ruleset only (no plugin to
# download), with every rule of the "all" preset, stricter than "recommended".
config {
  call_module_type = "local"
}

plugin "terraform" {
  enabled = true
  preset  = "all"
}
