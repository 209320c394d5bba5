import OutpostModels

// The field-service records by name, beside `Device`, so that `import Outpost` and
// `import OutpostFieldService` are all a field-service app writes. Each is defined and documented in
// OutpostModels.

/// A clock-in or clock-out of a crew member on a project. (`OutpostModels.TimeEntry`)
public typealias TimeEntry = OutpostModels.TimeEntry
/// A project's log for one day: weather, crew, work done. (`OutpostModels.DailyLog`)
public typealias DailyLog = OutpostModels.DailyLog
/// A sales opportunity a project may come from. (`OutpostModels.Opportunity`)
public typealias Opportunity = OutpostModels.Opportunity
/// A job: the unit members, bundles and access are scoped to. (`OutpostModels.Project`)
public typealias Project = OutpostModels.Project
/// A part of a project's estimate. (`OutpostModels.Scope`)
public typealias Scope = OutpostModels.Scope
/// A sheet of measurements taken for a scope. (`OutpostModels.MeasureSheet`)
public typealias MeasureSheet = OutpostModels.MeasureSheet
/// One measurement on a measure sheet. (`OutpostModels.Measure`)
public typealias Measure = OutpostModels.Measure
/// A priced line of a scope. (`OutpostModels.ScopeItem`)
public typealias ScopeItem = OutpostModels.ScopeItem
/// A discount on an estimate. (`OutpostModels.Discount`)
public typealias Discount = OutpostModels.Discount
/// A financing option offered with an estimate. (`OutpostModels.FinanceOption`)
public typealias FinanceOption = OutpostModels.FinanceOption
/// A fee on an estimate. (`OutpostModels.Fee`)
public typealias Fee = OutpostModels.Fee
/// A problem raised on a project, with its status, priority and place. (`OutpostModels.Issue`)
public typealias Issue = OutpostModels.Issue
/// A comment on an issue. (`OutpostModels.Comment`)
public typealias Comment = OutpostModels.Comment
/// Equipment or material tagged with a QR code. (`OutpostModels.Asset`)
public typealias Asset = OutpostModels.Asset
/// A drawing or document shipped with a project's bundle. (`OutpostModels.ReferenceDocument`)
public typealias ReferenceDocument = OutpostModels.ReferenceDocument
/// A photo or voice note attached to a record; its original file syncs after the data. (`OutpostModels.MediaAttachment`)
public typealias MediaAttachment = OutpostModels.MediaAttachment
/// A person's membership and role in a project. (`OutpostModels.Member`)
public typealias Member = OutpostModels.Member
