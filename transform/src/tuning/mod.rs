//! Tuning: which configuration wins. Today the TP scaling check of the Megatron TP overlap
//! tuner ([`tp_scaling`]), its report on disk ([`tp_report`]) and the per-operator TP overlap
//! measured inside named windows of the traces ([`tp_windows`]); the sweep report builds on
//! them.

pub mod tp_report;
pub mod tp_scaling;
pub mod tp_windows;
