//! Tuning: which configuration wins. Today the TP scaling check of the Megatron TP overlap
//! tuner ([`tp_scaling`]) and its report on disk ([`tp_report`]); the sweep report builds on
//! them.

pub mod tp_report;
pub mod tp_scaling;
