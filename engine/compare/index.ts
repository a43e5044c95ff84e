/** Comparing plans: their settings side by side (settings.ts) and what each differing setting does (attribution.ts). */
export { SETTING_KEYS, planSettings, settingOf, differingSettings, withSettingOf, type Setting, type SettingKey, type SettingValue, type ModelSetting, type GpuSetting, type LoraSetting } from './settings.ts';
export { attributionVariants, attributeDifference, attribute, type Attribution, type AttributionVariant, type ChangeEffect, type PeakMeasure, type VariantOutcome } from './attribution.ts';
