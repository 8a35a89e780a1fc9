import Foundation
import PackagePlugin

/// Compiles the package's `migrations/*.sql` into the target it is applied to (ParleyMigrations),
/// so the binary carries its schema. The target reaches the files through its `migrations`
/// symbolic link (to `../../migrations`): that makes them files of the target, so SwiftPM plans
/// the build again when one is added or removed, and reruns the command when one is edited.
@main
struct EmbedMigrations: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
        let files = ((target as? SourceModuleTarget)?.sourceFiles.map(\.url) ?? [])
            .filter { $0.pathExtension == "sql" && !$0.lastPathComponent.hasPrefix(".") }
            .sorted { $0.lastPathComponent < $1.lastPathComponent }
        let output = context.pluginWorkDirectoryURL.appending(path: "GeneratedMigrationFiles.swift")
        return [
            .buildCommand(
                displayName: "Embedding \(files.count) migrations into \(target.name)",
                executable: try context.tool(named: "EmbedMigrationsTool").url,
                arguments: [output.path] + files.map(\.path),
                inputFiles: files,
                outputFiles: [output]),
        ]
    }
}
