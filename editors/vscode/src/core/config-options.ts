// The agent's session config options (ACP `configOptions`: in session/new, load and resume answers, the
// set_config_option answer and `config_option_update`, each time the full set) as the pickers the chat view shows,
// in the agent's order. Only `select` options are shown: a `boolean` one needs a client capability this extension
// does not advertise, and ACP asks clients to ignore a type they do not know. Grouped values are kept in their
// groups, for <optgroup>.

import type { SessionConfigOption } from "@agentclientprotocol/sdk";

export interface ConfigValue {
  value: string;
  name: string;
  description: string;
  group: string | null; // the group's name, for a grouped select
}

export interface ConfigChoice {
  id: string; // what session/set_config_option names as configId: warpcode's are `mode` and `model`
  name: string;
  description: string;
  category: string | null; // ACP's semantic category (mode, model, model_config, thought_level, _custom)
  currentValue: string;
  values: ConfigValue[];
}

export function configChoices(options: SessionConfigOption[] | null | undefined): ConfigChoice[] {
  const choices: ConfigChoice[] = [];
  for (const option of options ?? []) {
    if (option.type !== "select") continue;
    const values: ConfigValue[] = [];
    for (const entry of option.options) {
      if ("group" in entry) values.push(...entry.options.map((v) => configValue(v, entry.name)));
      else values.push(configValue(entry, null));
    }
    choices.push({ id: option.id, name: option.name, description: option.description ?? "", category: option.category ?? null, currentValue: option.currentValue, values });
  }
  return choices;
}

function configValue(value: { value: string; name: string; description?: string | null }, group: string | null): ConfigValue {
  return { value: value.value, name: value.name, description: value.description ?? "", group };
}
